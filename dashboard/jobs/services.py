"""Conversion jobs: create, launch, dispatch, run one thread, pause, resume, cancel, retry, revert.

The one domain module behind the pages, the JSON API, the Celery tasks and
the ``convert_threads`` command. The unit of work is a :class:`ThreadResult`
row; :func:`run_thread` is the only code that converts a thread, whoever
calls it:

* Celery: :func:`launch` sends ``jobs.dispatch``; :func:`claim_batch` moves
  up to ``max_in_flight`` pending rows to ``queued`` under the job's row lock;
  each ``jobs.run_thread`` task calls :func:`run_thread`, then
  :func:`claim_batch` again for the next row (countdown = throttle).
* The command: :func:`run_inline` does the same loop in its own process.

:func:`run_thread` claims its row with a conditional UPDATE (a process that
loses the race does nothing), acts only while the job is ``running`` (pause
and cancel take effect between threads), and records the
``deerflow.convert`` report, or a refusal, or an error, as data on the row.
Only a row claimed with the same claim number (``attempts``) can be
recorded, so a slow duplicate never overwrites a newer attempt.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import kombu.exceptions
import redis.exceptions
from celery.exceptions import TimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Sum
from django.utils import timezone

from dashboard.errors import describe
from dashboard.jobs import compaction, owners, pruning, resolving
from dashboard.jobs import selection as sel
from dashboard.jobs.errors import (
    UNEXPECTED_ERROR_HINT,
    WORKER_FULL_MODE_HINT,
    EstimateRequired,
    FullModeFleet,
    InvalidSelection,
    InvalidTransition,
    NotADryRun,
    NothingToConvert,
    RetentionMismatch,
    SizeLimitExceeded,
    TransientDatabaseError,
    is_transient,
)
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.progress import succeeded
from dashboard.jobs.writable import check_can_write
from dashboard.runtime import DashboardRuntime, get_runtime
from deerflow import convert, inventory
from deerflow.errors import CheckpointModeMismatchError, CheckpointModeReconfigurationError

__all__ = [
    "Batch", "Run", "active_backups", "cancel", "claim_batch", "create_job", "launch", "pause", "record_failure",
    "resume", "retry", "revert", "run_inline", "run_thread", "unqueue",
]

log = logging.getLogger("dashboard.jobs")
Job, Result, State, Kind = ConversionJob, ThreadResult, ConversionJob.State, ConversionJob.Kind


# -- create -------------------------------------------------------------------
def create_job(user: Any, kind: str, selection: dict[str, Any] | None = None, *,
               source_job: ConversionJob | None = None, parent: ConversionJob | None = None,
               throttle_delay_s: float = 0.0, max_in_flight: int = 1, integrity: bool = True,
               confirmed: bool = False, size_limit_bytes: int | None = None, runner: str = "celery",
               launched_by: str = "", force_full_fleet: bool = False,
               retention: dict[str, Any] | None = None) -> ConversionJob:
    """Create a job and its pending result rows (does not start it; see :func:`launch`).

    A Celery job selecting threads by filter (without a source job) is created ``resolving`` and without rows:
    its dispatch task resolves the filter in a worker (:mod:`dashboard.jobs.resolving`); here at most one page
    of threads is read, so the request answers at once whatever the filter matches.

    Args:
        user: the launching user (``None`` for the command line; then give ``launched_by``).
        kind: ``dry_run``, ``convert``, ``revert``, ``compact_dry_run``, ``compact``, ``prune_dry_run`` or ``prune``.
        selection: see :mod:`dashboard.jobs.selection`; ``None`` derives it from
            ``source_job`` (a conversion takes the dry run's ``needs_conversion``
            threads, a revert takes the conversion's backups).
        source_job: a finished dry run (estimates a conversion) or a conversion (for a revert).
        throttle_delay_s: seconds between thread tasks (>= 0).
        max_in_flight: thread tasks queued or running at once (>= 1).
        confirmed: accept an estimate above the size limit, or a conversion without a dry run.
        size_limit_bytes: default: the source job's limit, else ``settings.CONVERSION_SIZE_LIMIT_BYTES``.
        force_full_fleet: compact although live full-mode processes are registered.
        retention: prune kinds: the rule (:func:`dashboard.jobs.pruning.normalize_retention`); a ``prune``
            confirmed from a dry run takes the dry run's rule, N and protected set (``retention`` may then
            only say ``backup``).

    Raises:
        InvalidSelection, NothingToConvert, EstimateRequired, SizeLimitExceeded.
        InvalidRetention: a prune kind without a valid rule. RetentionMismatch: a prune whose rule differs
            from its dry run's.
        FullModeFleet: a ``compact`` job while a live registered process is in full mode (unless forced).
        ReadOnlyDatabase: a job that writes (not a dry run) on a database this process may only read.
        NotADryRun: a conversion whose ``source_job`` is not a finished dry run.
    """
    if throttle_delay_s < 0 or max_in_flight < 1:
        raise InvalidSelection("throttle_delay_s must be >= 0 and max_in_flight >= 1.")
    limits = settings.BROKER_LIMITS
    if runner == "celery" and limits.broker_timeout_s and throttle_delay_s >= limits.broker_timeout_s - limits.time_limit_s:
        # A countdown task is held unacknowledged by a worker until it falls due and then while it runs:
        # past the broker's timeout it would be delivered again.
        raise InvalidSelection(
            f"throttle_delay_s must be below {limits.broker_timeout_s - limits.time_limit_s} s: a thread task waits "
            f"for it and then runs (up to {limits.time_limit_s} s) unacknowledged, and the broker delivers again a "
            f"task held {limits.broker_timeout_s} s. Raise the broker's timeout for longer pauses "
            "(docs/reliability.md, 'Brokers').")
    if kind in _WRITES and source_job is not None and not _finished_dry_run(source_job, kind):
        raise NotADryRun(source_job.pk)
    if kind == Kind.COMPACT and not force_full_fleet:
        blockers = compaction.full_mode_processes()
        if blockers:
            raise FullModeFleet(f"{len(blockers)} live process(es) run in full mode and would answer 409 for "
                                f"compacted threads: {', '.join(p.name for p in blockers)}.")
    retention = _retention(kind, retention, source_job)
    selection = sel.normalize(kind, selection or _derived_selection(kind, source_job))
    if kind not in _DRY_RUNS:  # a role that may only read is refused before any job exists
        check_can_write(get_runtime().config.database)
    deferred = resolving.needs_worker(selection, runner=runner, source_job=source_job)  # a worker pages the filter
    if deferred:
        targets = [] if sel.filter_may_match(get_runtime(), selection["filter"]) else None
    else:
        targets = sel.resolve(get_runtime(), selection) or None
    if targets is None and "filter" in selection and (selection["filter"].get("mode") or "delta") == "delta":
        raise NothingToConvert("No delta thread matches this filter: a filter selects delta threads only, "
                               "and full threads need no conversion.")
    if targets is None:
        raise NothingToConvert("The selection matches no thread.")
    limit = size_limit_bytes or (source_job and source_job.size_limit_bytes) or settings.CONVERSION_SIZE_LIMIT_BYTES
    estimate = _estimate(kind, [t for t, _ in targets], source_job, confirmed)
    if estimate.get("bytes_after", 0) > limit and not confirmed:
        raise SizeLimitExceeded(f"The dry run estimates {estimate['bytes_after']:,} bytes after conversion, "
                                f"above the size limit of {limit:,} bytes.")
    with transaction.atomic():
        job = Job.objects.create(
            kind=kind, selection=selection, estimate=estimate, source_job=source_job, parent=parent,
            created_by=user, launched_by=launched_by or getattr(user, "username", ""), runner=runner,
            throttle_delay_s=throttle_delay_s, max_in_flight=max_in_flight, integrity=integrity,
            confirmed=confirmed, size_limit_bytes=limit, retention=retention,
            state=State.RESOLVING if deferred else State.QUEUED)
        Result.objects.bulk_create([Result(job=job, thread_id=t, backup_id=b) for t, b in targets],
                                   batch_size=resolving.BATCH)
    return job


#: The kinds that write threads -> (the dry-run kind that estimates them, the dry run's "would write" status,
#: the status of a written thread).
_WRITES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    Kind.CONVERT: (Kind.DRY_RUN, ("needs_conversion",), ("converted",)),
    Kind.COMPACT: (Kind.COMPACT_DRY_RUN, ("needs_compaction",), ("compacted",)),
    Kind.PRUNE: (Kind.PRUNE_DRY_RUN, ("would_prune", "would_delete"), pruning.WRITTEN)}
_DRY_RUNS = (Kind.DRY_RUN, Kind.COMPACT_DRY_RUN, Kind.PRUNE_DRY_RUN)
_PRUNE_KINDS = (Kind.PRUNE_DRY_RUN, Kind.PRUNE)


def _retention(kind: str, given: dict[str, Any] | None, source: ConversionJob | None) -> dict[str, Any]:
    """The rule a prune job carries (``{}`` for other kinds); see :func:`create_job`."""
    if kind not in _PRUNE_KINDS:
        return {}
    given = dict(given or {})
    if kind == Kind.PRUNE and source is not None and source.kind == Kind.PRUNE_DRY_RUN:
        planned = source.retention
        asked = {k: v for k, v in given.items() if k != "backup" and v not in (None, [])}
        differs = [k for k, v in asked.items() if planned.get(k) != v]
        if differs:
            raise RetentionMismatch(f"Dry run {source.pk} previewed rule {planned.get('rule')} "
                                    f"(keep_last {planned.get('keep_last')}, protect {planned.get('protect')}); "
                                    f"this prune asks for another {', '.join(differs)}.")
        return pruning.normalize_retention({**planned, "backup": given.get("backup", True)})
    return pruning.normalize_retention(given)


def _derived_selection(kind: str, source: ConversionJob | None) -> dict[str, Any]:
    if source is None:
        raise InvalidSelection("Select threads (thread_ids or filter), backups, or a source job.")
    if kind in _WRITES and source.kind == _WRITES[kind][0]:
        ids = list(source.results.filter(status__in=_WRITES[kind][1]).values_list("thread_id", flat=True))
        if not ids:
            raise NothingToConvert(f"Dry run {source.pk} found no thread that needs "
                                   f"{ {Kind.CONVERT: 'conversion', Kind.COMPACT: 'compaction'}.get(kind, 'pruning')}.")
        return {"thread_ids": ids}
    if kind == Kind.REVERT and source.kind in _WRITES:
        return {"backup_ids": _revertible(source)}
    raise InvalidSelection(f"A {kind} job cannot be derived from a {source.kind} job.")


def _finished_dry_run(job: ConversionJob, kind: str = Kind.CONVERT) -> bool:
    return job.kind == _WRITES[kind][0] and job.finished


def _converted_backups(job: ConversionJob) -> list[str]:
    return list(job.results.filter(status__in=("converted", "compacted", *pruning.WRITTEN)).exclude(backup_id="")
                .values_list("backup_id", flat=True))


def active_backups(job: ConversionJob) -> list[str]:
    """The backups conversion ``job`` wrote that are still active (not restored by a revert, not purged)."""
    written = _converted_backups(job)
    if not written:
        return []
    active = {b.backup_id for b in convert.list_backups(get_runtime().config.database) if b.status == "active"}
    return [b for b in written if b in active]


def _revertible(source: ConversionJob) -> list[str]:
    """The backups a revert of ``source`` restores: those still active."""
    if not _converted_backups(source):
        raise NothingToConvert(f"Job {source.pk} converted no thread; there is nothing to revert.")
    ids = active_backups(source)
    if not ids:
        raise InvalidSelection(f"Job {source.pk}'s backups were all restored or purged; there is nothing left "
                               "to revert.", hint="Nothing to do: the backups page (/jobs/backups/) shows each backup's status.")
    return ids


def _estimate(kind: str, thread_ids: list[str], source: ConversionJob | None, confirmed: bool) -> dict[str, Any]:
    """The dry run's totals for the threads a conversion will rewrite (``{}`` for other kinds)."""
    if kind not in _WRITES:
        return {}
    if source is None:
        if not confirmed:
            dry = _WRITES[kind][0]
            raise EstimateRequired(f"A {kind} job needs a dry-run estimate or an explicit confirmation.",
                                   hint=f"Run a dry run first (kind {dry}) and launch the {kind} from it "
                                        "(estimate_job), or confirm explicitly to go ahead without an estimate.")
        return {}
    if not _finished_dry_run(source, kind):
        raise NotADryRun(source.pk)
    rows = source.results.filter(thread_id__in=thread_ids, status__in=_WRITES[kind][1])
    sums = rows.aggregate(n=Count("id"), c=Sum("checkpoints_rewritten"), b=Sum("bytes_before"),
                          a=Sum("bytes_after"))
    return {"source_job": source.pk, "threads": sums["n"], "checkpoints_to_rewrite": sums["c"] or 0,
            "bytes_before": sums["b"] or 0, "bytes_after": sums["a"] or 0}


def launch(job: ConversionJob) -> None:
    """Start a Celery job once the surrounding transaction commits (inline jobs: see :func:`run_inline`).

    A broker that cannot be reached pauses the job (resume it once the
    broker is back) and the broker's error propagates, so pages and the API
    answer 503 with its hint (``dashboard.outages``) instead of leaving a
    job ``queued`` that nothing will ever start.
    """
    if job.runner == "celery":
        transaction.on_commit(lambda: _send_dispatch(job.pk))


def _send_dispatch(job_id: int) -> None:
    from dashboard.jobs import tasks  # tasks import this module

    try:
        tasks.dispatch.delay(job_id)
    except (kombu.exceptions.OperationalError, redis.exceptions.ConnectionError) as exc:
        Job.objects.filter(pk=job_id, state__in=(State.QUEUED, State.RUNNING)).update(
            state=State.PAUSED, revision=F("revision") + 1)
        # A job still resolving its filter has no threads to resume: it is cancelled; launch it again.
        Job.objects.filter(pk=job_id, state=State.RESOLVING).update(
            state=State.CANCELLED, finished_at=timezone.now(), revision=F("revision") + 1)
        log.warning("job %s paused: the broker cannot be reached (%s); resume it once the broker is back",
                    job_id, exc)
        raise


# -- operator actions --------------------------------------------------------
def _transition(job: ConversionJob, sources: tuple[str, ...], target: str, verb: str) -> None:
    n = Job.objects.filter(pk=job.pk, state__in=sources).update(state=target, revision=F("revision") + 1)
    if not n:
        job.refresh_from_db(fields=["state"])
        raise InvalidTransition(f"Job {job.pk} is {job.get_state_display()}; it cannot be {verb}.")


def pause(job: ConversionJob) -> ConversionJob:
    """Stop starting threads; threads already running finish. Queued ones go back to pending.

    Raises:
        InvalidTransition: the job is not queued or running.
    """
    with transaction.atomic():
        _transition(job, (State.QUEUED, State.RUNNING), State.PAUSED, "paused")
        job.results.filter(status=Result.QUEUED).update(status=Result.PENDING)
    job.refresh_from_db()
    return job


def resume(job: ConversionJob) -> ConversionJob:
    """Continue a paused job on the Celery workers (also one paused while the command ran it).

    Raises:
        InvalidTransition: the job is not paused.
    """
    with transaction.atomic():
        _transition(job, (State.PAUSED,), State.RUNNING, "resumed")
        Job.objects.filter(pk=job.pk).update(runner="celery")
        job.refresh_from_db()
        launch(job)
    return job


def cancel(job: ConversionJob) -> ConversionJob:
    """Skip every thread that has not started; the job is cancelled when running ones finish.

    Raises:
        InvalidTransition: the job already finished.
    """
    with transaction.atomic():
        _transition(job, (State.RESOLVING, State.QUEUED, State.RUNNING, State.PAUSED), State.CANCELLING, "cancelled")
        job.results.filter(status__in=(Result.PENDING, Result.QUEUED)).update(
            status=Result.SKIPPED, error="Cancelled before it ran.", finished_at=timezone.now())
    claim_batch(job.pk)
    job.refresh_from_db()
    return job


def retry(job: ConversionJob, user: Any) -> ConversionJob:
    """A new job, linked to ``job``, re-running only its failed threads with the same arguments.

    Raises:
        InvalidTransition: the job has not finished, or nothing failed.
    """
    failed = [r for r in job.results.all() if r.status not in (Result.SKIPPED, *Result.OPEN)
              and not succeeded(job.kind, r.status)]
    if not job.finished or not failed:
        raise InvalidTransition(f"Job {job.pk} has no failed thread to retry (state {job.state}).")
    chosen = ({"backup_ids": [r.backup_id for r in failed]} if job.kind == Kind.REVERT
              else {"thread_ids": [r.thread_id for r in failed]})
    new = create_job(user, job.kind, chosen, source_job=job.source_job, parent=job,
                     throttle_delay_s=job.throttle_delay_s, max_in_flight=job.max_in_flight,
                     integrity=job.integrity, confirmed=job.confirmed, size_limit_bytes=job.size_limit_bytes,
                     retention=job.retention or None, launched_by=job.launched_by if user is None else "")
    launch(new)
    return new


def revert(job: ConversionJob, user: Any, **options: Any) -> ConversionJob:
    """A revert job restoring every thread ``job`` converted, from the backups it wrote.

    Raises:
        InvalidTransition: ``job`` is not a finished conversion.
        NothingToConvert: it converted nothing.
    """
    if job.kind not in _WRITES or not job.finished:
        raise InvalidTransition(f"Job {job.pk} is not a finished conversion; there is nothing to revert yet.")
    new = create_job(user, Kind.REVERT, source_job=job, throttle_delay_s=job.throttle_delay_s,
                     max_in_flight=job.max_in_flight, **options)
    launch(new)
    return new


# -- dispatch ----------------------------------------------------------------
@dataclass
class Batch:
    """What :func:`claim_batch` decided: rows to send now with their countdowns (seconds), and the job state."""

    job_id: int
    sends: list[tuple[int, float]] = field(default_factory=list)
    state: str = ""


def claim_batch(job_id: int) -> Batch:
    """Move pending rows to ``queued`` up to ``max_in_flight``, and finish the job when nothing is left.

    Runs under the job row's write lock (the ``revision`` UPDATE), so two
    dispatchers never both fill the same free slots. Countdowns stagger the
    sends by ``throttle_delay_s``; the first thread of a job starts at once.
    """
    with transaction.atomic():
        if not Job.objects.filter(pk=job_id).update(revision=F("revision") + 1):
            return Batch(job_id, state="missing")
        job = Job.objects.get(pk=job_id)
        if job.state == State.QUEUED:
            job.state, job.started_at = State.RUNNING, job.started_at or timezone.now()
            job.save(update_fields=["state", "started_at"])
        sends = _fill_slots(job) if job.state == State.RUNNING else []
        _finish_if_done(job)
    return Batch(job_id, sends, job.state)


def _fill_slots(job: ConversionJob) -> list[tuple[int, float]]:
    in_flight = job.results.filter(status__in=Result.IN_FLIGHT).count()
    free = max(job.max_in_flight - in_flight, 0)
    ids = list(job.results.filter(status=Result.PENDING).order_by("id").values_list("id", flat=True)[:free])
    started = in_flight or job.results.exclude(status__in=Result.OPEN).exists()
    delay = job.throttle_delay_s
    sends = [(rid, (i + (1 if started else 0)) * delay) for i, rid in enumerate(ids)]
    now = timezone.now()
    for rid, countdown in sends:  # queued_at: when the task falls due (dashboard.jobs.stalls)
        Result.objects.filter(id=rid, status=Result.PENDING).update(
            status=Result.QUEUED, queued_at=now + dt.timedelta(seconds=countdown))
    return sends


def _finish_if_done(job: ConversionJob) -> None:
    counts = dict(job.results.values_list("status").annotate(n=Count("id")).order_by())
    open_rows = sum(counts.get(s, 0) for s in Result.OPEN)
    if job.state == State.RUNNING and not open_rows:
        job.state = _final_state(job.kind, counts)
    elif job.state == State.CANCELLING and not counts.get(Result.RUNNING):
        job.results.filter(status__in=(Result.PENDING, Result.QUEUED)).update(status=Result.SKIPPED)
        job.state = State.CANCELLED
    else:
        return
    job.finished_at = timezone.now()
    job.save(update_fields=["state", "finished_at"])


def _final_state(kind: str, counts: dict[str, int]) -> str:
    ok = sum(n for s, n in counts.items() if succeeded(kind, s))
    failed = sum(counts.values()) - ok - counts.get(Result.SKIPPED, 0)
    if not failed:
        return State.SUCCEEDED
    return State.FAILED if not ok else State.PARTIALLY_FAILED


# -- one thread ---------------------------------------------------------------
class Run(NamedTuple):
    """:func:`run_thread`'s answer: the row as it is now, and whether this call ran the thread."""

    result: ThreadResult
    ran: bool


@dataclass
class _Outcome:
    report: convert.ThreadReport
    code: str = ""
    prune: dict[str, Any] = field(default_factory=dict)


def run_thread(result_id: int, *, reclaim: bool = False, worker_node: str = "") -> Run:
    """Claim one result row, run its dry run / conversion / revert, and record the outcome on the row.

    Args:
        result_id: the :class:`ThreadResult` to run.
        reclaim: the caller is a redelivery of a task whose worker died
            (the row may be stuck in ``running``); claim it anyway.
        worker_node: the Celery node name, recorded with host, pid, mode and cadence.

    Returns:
        :class:`Run`; ``ran`` is false when another process holds the row,
        the row already finished, or the job is not running (paused/cancelled) and the row is no dead
        worker's started thread.

    Raises:
        TransientDatabaseError: a retryable database error; the row is back to ``queued``.
        ThreadResult.DoesNotExist: no such row.
    """
    rt = get_runtime()
    token = _claim(rt, result_id, reclaim=reclaim, worker_node=worker_node)
    result = Result.objects.select_related("job").get(pk=result_id)
    if token is None:
        return Run(result, False)
    try:
        outcome = _execute(rt, result)
    except Exception as exc:
        if is_transient(exc):
            Result.objects.filter(pk=result_id, attempts=token).update(status=Result.QUEUED)
            raise TransientDatabaseError(f"{type(exc).__name__}: {exc}") from exc
        log.exception("job %s: thread %r failed", result.job_id, result.thread_id)
        outcome = _error_outcome(result.thread_id, exc)
    _record(result_id, token, outcome)
    result.refresh_from_db()
    return Run(result, True)


def _identity(rt: DashboardRuntime, worker_node: str) -> dict[str, Any]:
    return {"worker_host": socket.gethostname(), "worker_node": worker_node, "worker_pid": os.getpid(),
            "worker_mode": rt.mode, "worker_snapshot_frequency": rt.snapshot_frequency}


def _claim(rt: DashboardRuntime, result_id: int, *, reclaim: bool, worker_node: str) -> int | None:
    """The claim number (``attempts``) if this process won the row, else ``None``.

    A queued row is claimed while its job runs. A ``running`` row is taken
    over only from an owner that is gone (:func:`dashboard.jobs.owners.owner_alive`):
    a process of this host that no longer exists, or, for a redelivered task
    (``reclaim``: the broker believes the worker was lost), an owner that is
    not found running it. Such a row is claimed while the job runs, is paused
    or is being cancelled: that thread had started, and pause and cancel let
    started threads finish, so the redelivered task finishes it instead of
    leaving it ``running`` for ever. A redelivery whose owner still runs the
    thread (its worker only lost the broker connection for a moment, and
    Kombu restored the message) does nothing: the owner records the thread
    and moves the job on.
    """
    claim = {"status": Result.RUNNING, "attempts": F("attempts") + 1, "started_at": timezone.now(),
             "finished_at": None, **_identity(rt, worker_node)}
    with transaction.atomic():
        if Result.objects.filter(pk=result_id, status=Result.QUEUED, job__state=State.RUNNING).update(**claim):
            return Result.objects.values_list("attempts", flat=True).get(pk=result_id)
    owner = Result.objects.filter(pk=result_id, status=Result.RUNNING).values(
        "worker_host", "worker_pid", "worker_node", "attempts").first()
    if owner is None or not _owner_gone(owner, result_id, reclaim=reclaim):  # may ask another host (seconds)
        return None
    with transaction.atomic():
        if Result.objects.filter(pk=result_id, status=Result.RUNNING, attempts=owner["attempts"], job__state__in=(
                State.RUNNING, State.PAUSED, State.CANCELLING)).update(**claim):
            return Result.objects.values_list("attempts", flat=True).get(pk=result_id)
    return None


def _owner_gone(owner: dict[str, Any], result_id: int, *, reclaim: bool) -> bool:
    """A redelivery takes over unless the owner is seen running the row; otherwise only from a dead local pid."""
    if reclaim:
        return owners.owner_alive(owner, result_id) is not True
    return owner["worker_host"] == socket.gethostname() and owners.owner_alive(owner, result_id) is False


def _execute(rt: DashboardRuntime, result: ThreadResult) -> _Outcome:
    job = result.job
    refusal = _refusal(rt, result)
    if refusal is not None:
        return refusal
    database, note = rt.config.database, f"dashboard job {job.pk}"
    if job.kind in _PRUNE_KINDS:
        report, lists = pruning.run_one(rt, result.thread_id, job.retention, dry_run=job.kind == Kind.PRUNE_DRY_RUN,
                                        note=note, retried=result.attempts > 1)
        return _Outcome(report, prune=lists)
    if job.kind == Kind.REVERT and pruning.is_prune_backup(result.backup_id):
        report, lists = pruning.revert_one(rt, result.backup_id)
        return _Outcome(report, prune=lists)
    if job.kind in (Kind.COMPACT_DRY_RUN, Kind.COMPACT):
        return _Outcome(compaction.run_one(rt, result.thread_id, dry_run=job.kind == Kind.COMPACT_DRY_RUN,
                                           integrity=job.integrity, note=note, retried=result.attempts > 1))
    if job.kind == Kind.DRY_RUN:
        return _Outcome(convert.dry_run_thread(database, result.thread_id, integrity=job.integrity))
    if job.kind == Kind.REVERT:
        return _Outcome(convert.revert_thread(database, result.backup_id))
    report = convert.convert_thread(database, result.thread_id, integrity=job.integrity, note=note)
    return _Outcome(_recover_committed(rt, result, report, note))


def _refusal(rt: DashboardRuntime, result: ThreadResult) -> _Outcome | None:
    """A 503 when config.yaml drifted; the spec's 409 when this full-mode process would need a delta reader."""
    try:
        rt.check_drift()
    except CheckpointModeReconfigurationError as exc:
        view = describe(exc)
        return _refused(result.thread_id, view.detail, view.hint, view.code)
    if rt.mode == "delta" or (result.job.kind not in (Kind.COMPACT_DRY_RUN, Kind.COMPACT, *_PRUNE_KINDS)
                              and not _needs_delta_reader(rt, result)):
        return None
    view = describe(CheckpointModeMismatchError(thread_id=result.thread_id))
    return _refused(result.thread_id, view.detail, WORKER_FULL_MODE_HINT, view.code)


def _needs_delta_reader(rt: DashboardRuntime, result: ThreadResult) -> bool:
    if result.job.kind == Kind.REVERT:
        return True  # the restored rows are delta rows, verified by replaying them
    summary = inventory.get_thread_summary(rt.saver, result.thread_id)
    return summary is not None and summary.mode == "delta"


def _refused(thread_id: str, detail: str, hint: str, code: str) -> _Outcome:
    return _Outcome(convert.ThreadReport(thread_id=thread_id, status=Result.REFUSED, error=detail, hint=hint),
                    code)


TIME_LIMIT_HINT = ("The thread task ran past its time limit (DASHBOARD_TASK_TIME_LIMIT_S, kept below the broker's "
                   "timeout) and its process was stopped; its conversion rolled back. Raise both limits together, then retry "
                   "the job (docs/reliability.md, 'Brokers').")


def _error_outcome(thread_id: str, exc: Exception) -> _Outcome:
    report = convert.ThreadReport(thread_id=thread_id, status=Result.ERROR,
                                  error=f"{type(exc).__name__}: {exc}", hint=UNEXPECTED_ERROR_HINT)
    return _Outcome(report, "unexpected_error")


def _recover_committed(rt: DashboardRuntime, result: ThreadResult, report: convert.ThreadReport,
                       note: str) -> convert.ThreadReport:
    """A retried row whose earlier attempt committed but died before recording: report that conversion."""
    if report.status != "already_full" or result.attempts < 2:
        return report
    mine = [b for b in convert.list_backups(rt.config.database, result.thread_id)
            if b.note == note and b.status == "active"]
    if mine:
        report.status, report.backup_id = "converted", mine[0].backup_id
        report.hint = "Converted by an earlier attempt of this job whose worker stopped before recording it."
    return report


def _record(result_id: int, token: int, outcome: _Outcome) -> bool:
    r = outcome.report
    fields: dict[str, Any] = {
        "status": r.status, "checkpoints_total": r.checkpoints_total,
        "checkpoints_rewritten": r.checkpoints_to_rewrite, "bytes_before": r.bytes_before,
        "bytes_after": r.bytes_after, "head_messages_sha256": r.head_messages_sha256 or "",
        "first_difference": r.first_difference, "findings": r.findings, "error": r.error or "",
        "hint": r.hint or "", "error_code": outcome.code, "duration_s": r.duration_s,
        "finished_at": timezone.now(), "prune": outcome.prune,
    }
    if r.backup_id:
        fields["backup_id"] = r.backup_id
    n = Result.objects.filter(pk=result_id, status=Result.RUNNING, attempts=token).update(**fields)
    if not n:
        log.warning("result %s: attempt %s was superseded; its outcome %s is not recorded", result_id, token, r.status)
    return bool(n)


def record_failure(result_id: int, exc: BaseException) -> int | None:
    """Record a task that failed for good (retries exhausted) as an error on its row, if still in flight.

    Returns:
        The row's job id, or ``None`` when there is no such row.
    """
    timed_out = isinstance(exc, TimeLimitExceeded)
    Result.objects.filter(pk=result_id, status__in=Result.IN_FLIGHT).update(
        status=Result.ERROR, error=f"{type(exc).__name__}: {exc}",
        error_code="time_limit" if timed_out else "task_failed",
        hint=TIME_LIMIT_HINT if timed_out else
        "The task failed after its retries (database unreachable or locked). Retry the job later.",
        finished_at=timezone.now())
    return Result.objects.filter(pk=result_id).values_list("job_id", flat=True).first()


def unqueue(result_id: int) -> None:
    """Put a queued row back to pending (its task could not be sent); the next dispatch picks it up."""
    Result.objects.filter(pk=result_id, status=Result.QUEUED).update(status=Result.PENDING)


# -- in-process runner (management command) ----------------------------------
def run_inline(job: ConversionJob, *, on_result: Callable[[ThreadResult], None] | None = None,
               sleep: Callable[[float], None] = time.sleep) -> ConversionJob:
    """Run a job to the end in this process, one thread at a time, with the same claims and records.

    Stops early when the job is paused or cancelled from elsewhere (pages, API).
    ``on_result`` is called with each finished row (progress bars).
    """
    while True:
        batch = claim_batch(job.pk)
        if not batch.sends:
            break
        for result_id, countdown in batch.sends:
            if countdown:
                sleep(job.throttle_delay_s)
            run = _run_with_retries(result_id, sleep)
            if on_result is not None and run is not None and run.ran:
                on_result(run.result)
    job.refresh_from_db()
    return job


def _run_with_retries(result_id: int, sleep: Callable[[float], None], tries: int = 3) -> Run | None:
    """:func:`run_thread` with the Celery task's policy: transient errors retried with backoff, then recorded."""
    for attempt in range(tries):
        try:
            return run_thread(result_id, worker_node="inline")
        except TransientDatabaseError as exc:
            if attempt == tries - 1:
                record_failure(result_id, exc)
                return None
            sleep(2.0 ** attempt)
    return None
