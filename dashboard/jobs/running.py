"""Run one thread of a job: claim its row, convert / revert / prune it, record the outcome (:func:`run_thread`)."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any, NamedTuple

from celery.exceptions import TimeLimitExceeded
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from dashboard.errors import describe
from dashboard.errors.jobs import (
    UNEXPECTED_ERROR_HINT,
    WORKER_FULL_MODE_HINT,
    TransientDatabaseError,
    is_transient,
)
from dashboard.errors.outages import describe_storage_failure
from dashboard.jobs import kinds, owners, pruning, reservations
from dashboard.jobs.kinds import Outcome
from dashboard.jobs.models import State, ThreadResult
from dashboard.runtime import DashboardRuntime, get_runtime
from deerflow import convert, inventory
from deerflow.errors import CheckpointModeMismatchError, CheckpointModeReconfigurationError
from deerflow.runtime.checkpoint_mode import CheckpointMode
from deerflow.storage import RunInFlightError

__all__ = ["TIME_LIMIT_HINT", "Run", "record_batch_failure", "record_failure", "record_outcome", "run_thread",
           "run_threads", "unqueue"]

log = logging.getLogger("dashboard.jobs")


# -- one thread ---------------------------------------------------------------
class Run(NamedTuple):
    """:func:`run_thread`'s answer: the row as it is now, and whether this call ran the thread."""

    result: ThreadResult
    ran: bool


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
    result = ThreadResult.objects.select_related("job").get(pk=result_id)
    if token is None:
        return Run(result, False)
    try:
        outcome = _execute_reserved(rt, result)
    except Exception as exc:
        if is_transient(exc):
            ThreadResult.objects.filter(pk=result_id, attempts=token).update(status=ThreadResult.QUEUED)
            raise TransientDatabaseError(f"{type(exc).__name__}: {exc}") from exc
        log.exception("job %s: thread %r failed", result.job_id, result.thread_id)
        outcome = _error_outcome(result.thread_id, exc)
    record_outcome(result_id, token, outcome)
    result.refresh_from_db()
    return Run(result, True)


def run_threads(result_ids: list[int], *, reclaim: bool = False, worker_node: str = "") -> list[Run]:
    """Run a batch's rows one after another, each exactly as :func:`run_thread` runs it alone.

    A row that no longer exists (its job was deleted) is passed over. Pause and cancel act between rows: a
    row the job no longer lets start is not claimed (``ran`` false).

    Args:
        result_ids: the batch's rows, in the order they run (:mod:`dashboard.jobs.batches`).
        reclaim, worker_node: as for :func:`run_thread`.

    Returns:
        One :class:`Run` per existing row, in order.

    Raises:
        TransientDatabaseError: from the row that met it (that row is back to ``queued``; the rows after it
            have not started, and a retry of the batch runs them).
    """
    runs = []
    for result_id in result_ids:
        try:
            runs.append(run_thread(result_id, reclaim=reclaim, worker_node=worker_node))
        except ThreadResult.DoesNotExist:
            log.warning("result %s no longer exists; its batch goes on", result_id)
    return runs


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
    claim = {"status": ThreadResult.RUNNING, "attempts": F("attempts") + 1, "started_at": timezone.now(),
             "finished_at": None, **_identity(rt, worker_node)}
    with transaction.atomic():
        queued = ThreadResult.objects.filter(pk=result_id, status=ThreadResult.QUEUED, job__state=State.RUNNING)
        if queued.update(**claim):
            return ThreadResult.objects.values_list("attempts", flat=True).get(pk=result_id)
    owner = ThreadResult.objects.filter(pk=result_id, status=ThreadResult.RUNNING).values(
        "worker_host", "worker_pid", "worker_node", "attempts").first()
    if owner is None or not _owner_gone(owner, result_id, reclaim=reclaim):  # may ask another host (seconds)
        return None
    with transaction.atomic():
        stranded = ThreadResult.objects.filter(pk=result_id, status=ThreadResult.RUNNING, attempts=owner["attempts"],
                                               job__state__in=(State.RUNNING, State.PAUSED, State.CANCELLING))
        if stranded.update(**claim):
            return ThreadResult.objects.values_list("attempts", flat=True).get(pk=result_id)
    return None


def _owner_gone(owner: dict[str, Any], result_id: int, *, reclaim: bool) -> bool:
    """A redelivery takes over unless the owner is seen running the row; otherwise only from a dead local pid."""
    if reclaim:
        return owners.owner_alive(owner, result_id) is not True
    return owner["worker_host"] == socket.gethostname() and owners.owner_alive(owner, result_id) is False


def _execute_reserved(rt: DashboardRuntime, result: ThreadResult) -> Outcome:
    """:func:`_execute`, inside DeerFlow's ``checkpoint_write`` reservation when the kind writes stored threads
    (:mod:`dashboard.jobs.reservations`); a thread DeerFlow holds is recorded ``run_in_flight``, untouched. A
    prune past its job's per-run deletion cap is skipped before anything is reserved."""
    spec = kinds.get(result.job.kind)
    if spec.carries_retention and (capped := pruning.cap_outcome(result)) is not None:
        return Outcome(capped, pruning.CAP_CODE)
    if not spec.writes_threads or _refusal(rt, result, spec) is not None:
        return _execute(rt, result)
    try:
        with reservations.hold(rt, result) as held:
            outcome = _execute(rt, result)
            # the history cache goes before the reservation does: DeerFlow admits no run on the thread meanwhile
            outcome.deerflow = reservations.after_rewrite(rt, result.thread_id, outcome.report.status, held)
    except RunInFlightError as exc:
        report, deerflow = reservations.in_flight(result.thread_id, exc)
        return Outcome(report, reservations.RUN_IN_FLIGHT, deerflow=deerflow)
    return outcome


def _execute(rt: DashboardRuntime, result: ThreadResult) -> Outcome:
    """Run the row by its kind's dispatch (:mod:`dashboard.jobs.kinds`), unless this worker must refuse it.

    ``spec.writes_threads`` says whether the dispatch rewrites a stored thread (a writing job's row).
    """
    job = result.job
    spec = kinds.get(job.kind)
    refusal = _refusal(rt, result, spec)
    if refusal is not None:
        return refusal
    note = f"dashboard job {job.pk}"
    return spec.dispatch(rt, result, note)


def _refusal(rt: DashboardRuntime, result: ThreadResult, spec: kinds.JobKind) -> Outcome | None:
    """A 503 when config.yaml drifted; the spec's 409 when this full-mode process would need a delta reader."""
    try:
        rt.check_drift()
    except CheckpointModeReconfigurationError as exc:
        view = describe(exc)
        return _refused(result.thread_id, view.detail, view.hint, view.code)
    if rt.mode == CheckpointMode.DELTA or not _needs_delta_reader(rt, result, spec):
        return None
    view = describe(CheckpointModeMismatchError(thread_id=result.thread_id))
    return _refused(result.thread_id, view.detail, WORKER_FULL_MODE_HINT, view.code)


def _needs_delta_reader(rt: DashboardRuntime, result: ThreadResult, spec: kinds.JobKind) -> bool:
    """The row needs a delta-mode worker: always for :attr:`WorkerMode.DELTA` kinds, never for ``ANY``, and for
    ``THREAD`` kinds when the thread is in delta mode."""
    if spec.worker_mode != kinds.WorkerMode.THREAD:
        return spec.worker_mode == kinds.WorkerMode.DELTA
    summary = inventory.get_thread_summary(rt.saver, result.thread_id)
    return summary is not None and summary.mode == CheckpointMode.DELTA


def _refused(thread_id: str, detail: str, hint: str, code: str) -> Outcome:
    return Outcome(convert.ThreadReport(thread_id=thread_id, status=ThreadResult.REFUSED, error=detail, hint=hint),
                   code)


TIME_LIMIT_HINT = ("The thread task ran past its time limit (DASHBOARD_TASK_TIME_LIMIT_S, kept below the broker's "
                   "timeout) and its process was stopped; its conversion rolled back. Raise both limits together, "
                   "then retry the job (docs/reliability.md, 'Brokers').")


def _error_outcome(thread_id: str, exc: Exception) -> Outcome:
    storage = describe_storage_failure(exc)  # a read-only database, a failing disk: its code and hint
    if storage is not None:
        code, detail, hint = storage
        return Outcome(convert.ThreadReport(thread_id=thread_id, status=ThreadResult.ERROR, error=detail, hint=hint),
                       code)
    report = convert.ThreadReport(thread_id=thread_id, status=ThreadResult.ERROR,
                                  error=f"{type(exc).__name__}: {exc}", hint=UNEXPECTED_ERROR_HINT)
    return Outcome(report, "unexpected_error")


def record_outcome(result_id: int, token: int, outcome: Outcome) -> bool:
    """Record ``outcome`` on the row if it is still ``running`` under claim number ``token``.

    Returns false (and records nothing) when a newer attempt superseded this one.
    """
    r = outcome.report
    fields: dict[str, Any] = {
        "status": r.status, "checkpoints_total": r.checkpoints_total,
        "checkpoints_rewritten": r.checkpoints_to_rewrite, "bytes_before": r.bytes_before,
        "bytes_after": r.bytes_after, "head_messages_sha256": r.head_messages_sha256 or "",
        "first_difference": r.first_difference, "findings": r.findings, "error": r.error or "",
        "hint": r.hint or "", "error_code": outcome.code, "duration_s": r.duration_s,
        "finished_at": timezone.now(), "prune": outcome.prune, "deerflow": outcome.deerflow,
    }
    if r.backup_id:
        fields["backup_id"] = r.backup_id
    n = ThreadResult.objects.filter(pk=result_id, status=ThreadResult.RUNNING, attempts=token).update(**fields)
    if not n:
        log.warning("result %s: attempt %s was superseded; its outcome %s is not recorded", result_id, token, r.status)
    return bool(n)


def record_failure(result_id: int, exc: BaseException) -> int | None:
    """Record a task that failed for good (retries exhausted) as an error on its row, if still in flight.

    Returns:
        The row's job id, or ``None`` when there is no such row.
    """
    timed_out = isinstance(exc, TimeLimitExceeded)
    committed = _committed_by(result_id) if timed_out else None
    if committed is not None:  # stopped after its transaction committed: the row says what happened
        status, backup_id = committed
        ThreadResult.objects.filter(pk=result_id, status__in=ThreadResult.IN_FLIGHT).update(
            status=status, backup_id=backup_id, error="", error_code="",
            hint=f"The task ran past its time limit after its transaction committed: the thread was rewritten "
                 f"(backup {backup_id}); only the recording of its figures was cut short.",
            finished_at=timezone.now())
        return ThreadResult.objects.filter(pk=result_id).values_list("job_id", flat=True).first()
    ThreadResult.objects.filter(pk=result_id, status__in=ThreadResult.IN_FLIGHT).update(
        status=ThreadResult.ERROR, error=f"{type(exc).__name__}: {exc}",
        error_code="time_limit" if timed_out else "task_failed",
        hint=TIME_LIMIT_HINT if timed_out else
        "The task failed after its retries (database unreachable or locked). Retry the job later.",
        finished_at=timezone.now())
    return ThreadResult.objects.filter(pk=result_id).values_list("job_id", flat=True).first()


def _committed_by(result_id: int) -> tuple[str, str] | None:
    """``(status, backup_id)`` when the row's own job committed a rewrite of its thread, else ``None``.

    A hard time limit can stop the process between the commit and the recording; the rewrite's backup (written in
    the same transaction, noted ``dashboard job <id>``) is the proof that it committed. Any failure to look answers
    ``None`` (the row is then recorded as timed out, as before).
    """
    row = ThreadResult.objects.select_related("job").filter(pk=result_id).first()
    status = kinds.get(row.job.kind).committed_status if row is not None else ""
    if row is None or not status:
        return None
    note = f"dashboard job {row.job_id}"
    try:
        mine = [b for b in convert.list_backups(get_runtime().config.database, row.thread_id)
                if b.note == note and b.status == "active"]
    except Exception:  # noqa: BLE001 - the database is unreachable: record the time limit as before
        log.exception("result %s: could not look for a committed backup", result_id)
        return None
    return (status, mine[0].backup_id) if mine else None


def record_batch_failure(result_ids: list[int], exc: BaseException) -> int | None:
    """A batch's task failed for good (retries exhausted, or the time limit): record it on the row it was running.

    The rows run in order: the failure struck the row still ``running`` or, for a database error (which puts
    its row back to ``queued``), the first row still queued; a time limit that struck between two rows struck
    none. That row is recorded (:func:`record_failure`); the rows after it never started and go back to
    pending, for the next dispatch to send again.

    Returns:
        The rows' job id, or ``None`` when none of them exists.
    """
    rows = dict(ThreadResult.objects.filter(pk__in=result_ids).values_list("pk", "status"))
    running = [rid for rid in result_ids if rows.get(rid) == ThreadResult.RUNNING]
    queued = [rid for rid in result_ids if rows.get(rid) == ThreadResult.QUEUED]
    struck = running[0] if running else (None if isinstance(exc, TimeLimitExceeded) or not queued else queued[0])
    job_id = record_failure(struck, exc) if struck is not None else None
    unqueue(*(rid for rid in result_ids if rid != struck))
    if job_id is None and rows:
        job_id = ThreadResult.objects.filter(pk__in=list(rows)).values_list("job_id", flat=True).first()
    return job_id


def unqueue(*result_ids: int) -> None:
    """Put queued rows back to pending (their task could not be sent, or never reached them); the next dispatch
    picks them up."""
    ThreadResult.objects.filter(pk__in=result_ids, status=ThreadResult.QUEUED).update(
        status=ThreadResult.PENDING, batch=None)
