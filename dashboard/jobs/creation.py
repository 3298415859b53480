"""Create a job and its pending result rows: checks, selection, estimate (:func:`create_job`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Sum

from dashboard.errors.jobs import (
    EstimateRequired,
    FullModeFleet,
    InvalidSelection,
    NotADryRun,
    NothingToConvert,
    RetentionMismatch,
    SizeLimitExceeded,
)
from dashboard.formatting import plural
from dashboard.jobs import compaction, kinds, pruning, resolving
from dashboard.jobs import selection as sel
from dashboard.jobs.admission import admit_launch
from dashboard.jobs.models import ConversionJob, State, ThreadResult
from dashboard.jobs.writable import check_can_write
from dashboard.runtime import get_runtime
from deerflow import convert
from deerflow.runtime.checkpoint_mode import CheckpointMode

__all__ = ["JobOptions", "active_backups", "create_job", "is_finished_dry_run"]

log = logging.getLogger("dashboard.jobs")


@dataclass(frozen=True)
class JobOptions:
    """How a job runs, besides its kind and selection (every field has the default a page launch uses).

    Attributes:
        source_job: a finished dry run (estimates a writing job) or a finished writing job (for a revert); a
            ``None`` selection is derived from it (its dry run's rewritable threads, or its active backups).
        parent: the job a retry re-runs the failed threads of.
        throttle_delay_s: seconds between thread tasks (>= 0).
        max_in_flight: thread tasks queued or running at once (>= 1); a task runs its batch of threads one after
            another, so this is also the most threads that run at once (:mod:`dashboard.jobs.batches`).
        integrity: compare the one-pass materialization with LangGraph's reader before writing.
        confirmed: accept an estimate above the size limit, or a writing job without a dry run.
        size_limit_bytes: default: the source job's limit, else ``settings.CONVERSION_SIZE_LIMIT_BYTES``.
        runner: ``celery`` (workers) or ``inline`` (the management command).
        launched_by: who launched it as text (default: the user's name).
        force_full_fleet: compact although live full-mode processes are registered.
        retention: prune kinds: the rule (:func:`dashboard.jobs.pruning.normalize_retention`); a ``prune``
            confirmed from a dry run takes the dry run's rule, N and protected set (``retention`` may then
            only say ``backup``).
        acknowledge_branch_ambiguous: convert sibling forks as LangGraph's reader reads them.
    """

    source_job: ConversionJob | None = None
    parent: ConversionJob | None = None
    throttle_delay_s: float = 0.0
    max_in_flight: int = 1
    integrity: bool = True
    confirmed: bool = False
    size_limit_bytes: int | None = None
    runner: str = "celery"
    launched_by: str = ""
    force_full_fleet: bool = False
    retention: dict[str, Any] | None = None
    acknowledge_branch_ambiguous: bool = False


# -- create -------------------------------------------------------------------
def create_job(user: Any, kind: str, selection: dict[str, Any] | None = None,
               options: JobOptions = JobOptions()) -> ConversionJob:
    """Create a job and its pending result rows (does not start it; see :func:`dashboard.jobs.services.launch`).

    A Celery job selecting threads by filter (without a source job) is created ``resolving`` and without rows:
    its dispatch task resolves the filter in a worker (:mod:`dashboard.jobs.resolving`); here at most one page
    of threads is read, so the request answers at once whatever the filter matches.

    Args:
        user: the launching user (``None`` for the command line; then give ``options.launched_by``).
        kind: a :class:`ConversionJob.Kind` of :mod:`dashboard.jobs.kinds` that selects threads or backups
            (a reclaim is :func:`dashboard.jobs.reclaiming.create_reclaim_job`).
        selection: see :mod:`dashboard.jobs.selection`; ``None`` derives it from ``options.source_job``.
        options: :class:`JobOptions`.

    Raises:
        InvalidSelection, NothingToConvert, EstimateRequired, SizeLimitExceeded.
        InvalidRetention: a prune kind without a valid rule. RetentionMismatch: a prune whose rule differs
            from its dry run's.
        FullModeFleet: a ``compact`` job while a live registered process is in full mode (unless forced).
        ReadOnlyDatabase: a job that writes (not a dry run) on a database this process may only read.
        NotADryRun: a writing job whose ``source_job`` is not a finished dry run of its kind.
        NoLiveWorker, LaunchDuringDrift: see :func:`dashboard.jobs.admission.admit_launch`.
    """
    admit_launch(options.runner)
    spec = kinds.get(kind)
    if spec.selects == kinds.Selects.DATABASE:
        raise InvalidSelection(f"A {kind} job is created by its own page or body, not from a selection.")
    o = options
    _check_pace(o)
    if spec.estimated_by and o.source_job is not None and not is_finished_dry_run(o.source_job, kind):
        raise NotADryRun(o.source_job.pk, kind, spec.estimated_by)
    if spec.needs_delta_fleet and not o.force_full_fleet:
        blockers = compaction.full_mode_processes()
        if blockers:
            raise FullModeFleet(f"{plural(blockers, 'live process runs,live processes run')} in full mode and would "
                                f"answer 409 for compacted threads: {', '.join(p.name for p in blockers)}.")
    retention = _retention(kind, o.retention, o.source_job)
    selection = sel.normalize(kind, selection or _derived_selection(kind, o.source_job))
    if not spec.is_dry_run:  # a role that may only read is refused before any job exists
        check_can_write(get_runtime().config.database)
    targets = _targets(selection, o)
    limit = (o.size_limit_bytes or (o.source_job and o.source_job.size_limit_bytes)
             or settings.CONVERSION_SIZE_LIMIT_BYTES)
    estimate = _estimate(kind, [t for t, _ in targets], o.source_job, o.confirmed)
    if estimate.get("bytes_after", 0) > limit and not o.confirmed:
        raise SizeLimitExceeded(f"The dry run estimates {estimate['bytes_after']:,} bytes after conversion, "
                                f"above the size limit of {limit:,} bytes.")
    with transaction.atomic():
        job = ConversionJob.objects.create(
            kind=kind, selection=selection, estimate=estimate, source_job=o.source_job, parent=o.parent,
            created_by=user, launched_by=o.launched_by or getattr(user, "username", ""), runner=o.runner,
            throttle_delay_s=o.throttle_delay_s, max_in_flight=o.max_in_flight, integrity=o.integrity,
            confirmed=o.confirmed, size_limit_bytes=limit, retention=retention,
            state=State.RESOLVING if not targets and "filter" in selection else State.QUEUED,
            # a writing job keeps the acknowledgement of the dry run it was confirmed from
            acknowledge_branch_ambiguous=o.acknowledge_branch_ambiguous or bool(
                spec.estimated_by and o.source_job is not None and o.source_job.acknowledge_branch_ambiguous))
        ThreadResult.objects.bulk_create([ThreadResult(job=job, thread_id=t, backup_id=b) for t, b in targets],
                                   batch_size=resolving.BATCH)
    return job


def _check_pace(o: JobOptions) -> None:
    """Refuse a throttle or an in-flight count the workers and the broker cannot keep."""
    if o.throttle_delay_s < 0 or o.max_in_flight < 1:
        raise InvalidSelection("throttle_delay_s must be >= 0 and max_in_flight >= 1.")
    limits = settings.BROKER_LIMITS
    if (o.runner == "celery" and limits.broker_timeout_s
            and o.throttle_delay_s >= limits.broker_timeout_s - limits.time_limit_s):
        # A countdown task is held unacknowledged by a worker until it falls due and then while it runs:
        # past the broker's timeout it would be delivered again.
        raise InvalidSelection(
            f"throttle_delay_s must be below {limits.broker_timeout_s - limits.time_limit_s} s: a thread task waits "
            f"for it and then runs (up to {limits.time_limit_s} s) unacknowledged, and the broker delivers again a "
            f"task held {limits.broker_timeout_s} s. Raise the broker's timeout for longer pauses "
            "(docs/reliability.md, 'Brokers').")


def _targets(selection: dict[str, Any], o: JobOptions) -> list[sel.Target]:
    """The rows to create now: ``[]`` for a filter a worker resolves later (the job starts ``resolving``).

    Raises:
        NothingToConvert: the selection matches no thread.
    """
    deferred = resolving.needs_worker(selection, runner=o.runner, source_job=o.source_job)  # a worker pages it
    if deferred:
        targets: list[sel.Target] | None = [] if sel.filter_may_match(get_runtime(), selection["filter"]) else None
    else:
        targets = sel.resolve(get_runtime(), selection) or None
    delta_filter = (selection.get("filter") or {}).get("mode") in (None, "", CheckpointMode.DELTA)
    if targets is None and "filter" in selection and delta_filter:
        raise NothingToConvert("No delta thread matches this filter: a filter selects delta threads only, "
                               "and full threads need no conversion.")
    if targets is None:
        raise NothingToConvert("The selection matches no thread.")
    return targets


def _retention(kind: str, given: dict[str, Any] | None, source: ConversionJob | None) -> dict[str, Any]:
    """The rule a prune job carries (``{}`` for other kinds); see :func:`create_job`."""
    if not kinds.get(kind).carries_retention:
        return {}
    given = dict(given or {})
    if kinds.get(kind).estimated_by and source is not None and is_finished_dry_run(source, kind):
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
    spec = kinds.get(kind)
    if spec.estimated_by and source.kind == spec.estimated_by:
        ids = list(source.results.filter(status__in=spec.would_write).values_list("thread_id", flat=True))
        if not ids:
            raise NothingToConvert(f"Dry run {source.pk} found no thread that needs {spec.words.needed}.")
        return {"thread_ids": ids}
    if spec.selects == kinds.Selects.BACKUPS and source.kind in kinds.KINDS and kinds.get(source.kind).revertible:
        return {"backup_ids": _revertible(source)}
    raise InvalidSelection(f"A {kind} job cannot be derived from a {source.kind} job.")


def is_finished_dry_run(job: ConversionJob, kind: str) -> bool:
    """``job`` is a finished dry run of the kind that estimates a ``kind`` job (``convert``, ``compact``, ``prune``)."""
    return bool(kinds.get(kind).estimated_by) and job.kind == kinds.get(kind).estimated_by and job.finished


def _converted_backups(job: ConversionJob) -> list[str]:
    spec = kinds.KINDS.get(job.kind)
    return list(job.results.filter(status__in=spec.written if spec and spec.revertible else ())
                .exclude(backup_id="").values_list("backup_id", flat=True))


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
    """The dry run's totals for the threads a writing job will rewrite (``{}`` for kinds without a dry run)."""
    spec = kinds.get(kind)
    if not spec.estimated_by:
        return {}
    if source is None:
        if not confirmed:
            dry = spec.estimated_by
            raise EstimateRequired(f"A {kind} job needs a dry-run estimate or an explicit confirmation.",
                                   hint=f"Run a dry run first (kind {dry}) and launch the {kind} from it "
                                        "(estimate_job), or confirm explicitly to go ahead without an estimate.")
        return {}
    if not is_finished_dry_run(source, kind):
        raise NotADryRun(source.pk, kind, spec.estimated_by or "dry_run")
    rows = source.results.filter(thread_id__in=thread_ids, status__in=spec.would_write)
    sums = rows.aggregate(n=Count("id"), c=Sum("checkpoints_rewritten"), b=Sum("bytes_before"),
                          a=Sum("bytes_after"))
    return {"source_job": source.pk, "threads": sums["n"], "checkpoints_to_rewrite": sums["c"] or 0,
            "bytes_before": sums["b"] or 0, "bytes_after": sums["a"] or 0}
