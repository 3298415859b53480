"""Create a job and its pending result rows: checks, selection, estimate (:func:`create_job`)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Sum

from dashboard.jobs import compaction, pruning, resolving
from dashboard.jobs import selection as sel
from dashboard.jobs.admission import admit_launch
from dashboard.jobs.errors import (
    EstimateRequired,
    FullModeFleet,
    InvalidSelection,
    NotADryRun,
    NothingToConvert,
    RetentionMismatch,
    SizeLimitExceeded,
)
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.writable import check_can_write
from dashboard.runtime import get_runtime
from deerflow import convert

__all__ = ["active_backups", "create_job", "is_finished_dry_run"]

log = logging.getLogger("dashboard.jobs")
Job, Result, State, Kind = ConversionJob, ThreadResult, ConversionJob.State, ConversionJob.Kind


# -- create -------------------------------------------------------------------
def create_job(user: Any, kind: str, selection: dict[str, Any] | None = None, *,
               source_job: ConversionJob | None = None, parent: ConversionJob | None = None,
               throttle_delay_s: float = 0.0, max_in_flight: int = 1, integrity: bool = True,
               confirmed: bool = False, size_limit_bytes: int | None = None, runner: str = "celery",
               launched_by: str = "", force_full_fleet: bool = False,
               retention: dict[str, Any] | None = None, acknowledge_branch_ambiguous: bool = False) -> ConversionJob:
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
        NoLiveWorker, LaunchDuringDrift: see :func:`dashboard.jobs.admission.admit_launch`.
    """
    admit_launch(runner)
    if throttle_delay_s < 0 or max_in_flight < 1:
        raise InvalidSelection("throttle_delay_s must be >= 0 and max_in_flight >= 1.")
    limits = settings.BROKER_LIMITS
    if (runner == "celery" and limits.broker_timeout_s
            and throttle_delay_s >= limits.broker_timeout_s - limits.time_limit_s):
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
            state=State.RESOLVING if deferred else State.QUEUED,
            # a conversion keeps the acknowledgement of the dry run it was confirmed from
            acknowledge_branch_ambiguous=acknowledge_branch_ambiguous or bool(
                kind in _WRITES and source_job is not None and source_job.acknowledge_branch_ambiguous))
        Result.objects.bulk_create([Result(job=job, thread_id=t, backup_id=b) for t, b in targets],
                                   batch_size=resolving.BATCH)
    return job


#: The kinds that write threads -> (the dry-run kind that estimates them, the dry run's "would write" status,
#: the status of a written thread).
_WRITES = {Kind.CONVERT: (Kind.DRY_RUN, ("needs_conversion",), ("converted",)),
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


def is_finished_dry_run(job: ConversionJob, kind: str) -> bool:
    """``job`` is a finished dry run of the kind that estimates a ``kind`` job (``convert``, ``compact``, ``prune``)."""
    return _finished_dry_run(job, kind)


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
                               "to revert.",
                               hint="Nothing to do: the backups page (/jobs/backups/) shows each backup's status.")
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
