"""Full -> delta compaction for the dashboard: which threads, whether the fleet is ready, and running it.

The command (``convert_threads --to delta``) calls these; they call
:mod:`deerflow.convert.compactor` with this process's frozen cadence.
A compacted thread is delta: every full-mode process of the fleet would answer
409 for it, so compaction refuses while any live registered process is in
full mode (unless the caller overrides it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db.models import Count, Q, Sum
from django.utils import timezone

from dashboard.fleet.findings import MAINTENANCE_ROLES
from dashboard.fleet.models import ProcessRecord
from dashboard.fleet.processes import lease_expired
from dashboard.jobs import reservations
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.runtime import DashboardRuntime
from deerflow import inventory
from deerflow.convert import ThreadReport, compact_thread, dry_run_compact, list_backups
from deerflow.storage import RunInFlightError

__all__ = ["CompactionTotals", "LegacyEstimate", "candidate_threads", "compact", "dry_run", "full_mode_processes",
           "legacy_estimate", "run_one", "totals"]

_PAGE = 500
#: The note full-mode processes get for compacted threads (shown by the dry run and the confirmation).
FULL_MODE_409 = ("A compacted thread is stored in delta mode: a full-mode process answers 409 for it "
                 "(\"Thread requires delta mode; materialize and convert its checkpoints before using full mode.\").")


def full_mode_processes(now: dt.datetime | None = None) -> list[ProcessRecord]:
    """Live registered DeerFlow processes (not stopped, within their heartbeat lease) frozen in full mode.

    The dashboard's workers are maintenance processes (:data:`dashboard.fleet.findings.MAINTENANCE_ROLES`):
    they never serve a thread to DeerFlow's users, so they never block a compaction.
    """
    now = now or timezone.now()
    rows = ProcessRecord.objects.filter(stopped_at__isnull=True, mode="full").exclude(role__in=MAINTENANCE_ROLES)
    return [p for p in rows.order_by("name") if not lease_expired(p.last_heartbeat, p.heartbeat_interval_s, now)]


def candidate_threads(rt: DashboardRuntime) -> list[str]:
    """Every thread with legacy full storage: class ``full`` and ``migrated`` (delta head over full ancestors)."""
    out: list[str] = []
    for mode, thread_class in (("full", None), ("delta", "migrated")):
        cursor = None
        while True:
            page, cursor = inventory.list_threads(rt.saver, limit=_PAGE, cursor=cursor, mode=mode,
                                                  thread_class=thread_class)
            out += [t.thread_id for t in page]
            if cursor is None:
                break
    return sorted(dict.fromkeys(out))


def dry_run(rt: DashboardRuntime, thread_ids: Iterable[str], *, integrity: bool = True,
            on_report: Callable[[ThreadReport], None] | None = None) -> list[ThreadReport]:
    """:func:`dry_run_compact` per thread at this process's cadence (no lock, nothing written)."""
    reports = []
    for thread_id in thread_ids:
        report = dry_run_compact(rt.config.database, thread_id, snapshot_frequency=rt.snapshot_frequency,
                                 integrity=integrity)
        reports.append(report)
        if on_report is not None:
            on_report(report)
    return reports


def compact(rt: DashboardRuntime, thread_ids: Iterable[str], *, integrity: bool = True, note: str = "",
            on_report: Callable[[ThreadReport], None] | None = None) -> list[ThreadReport]:
    """:func:`compact_thread` per thread at this process's cadence (each verified and backed up), each inside
    DeerFlow's ``checkpoint_write`` reservation (:mod:`dashboard.jobs.reservations`): a thread DeerFlow is
    running is reported ``run_in_flight``, untouched."""
    reports = []
    for thread_id in thread_ids:
        try:
            with reservations.hold_thread(rt, thread_id, node="cli:convert_threads",
                                          metadata={"checkpoint_admin": {"command": "convert_threads"}}) as held:
                report = compact_thread(rt.config.database, thread_id, snapshot_frequency=rt.snapshot_frequency,
                                        integrity=integrity, note=note)
                reservations.after_rewrite(rt, thread_id, report.status, held)  # the cache goes first
        except RunInFlightError as exc:
            report = ThreadReport(thread_id=thread_id, status=reservations.RUN_IN_FLIGHT, error=str(exc),
                                  hint=reservations.IN_FLIGHT_HINT)
        reports.append(report)
        if on_report is not None:
            on_report(report)
    return reports


def run_one(rt: DashboardRuntime, thread_id: str, *, dry_run: bool, integrity: bool, note: str,
            retried: bool = False) -> ThreadReport:
    """One job row: the compaction preview or the compaction of ``thread_id`` at this process's cadence.

    A retried row whose earlier attempt committed but died before recording it
    (so this attempt finds ``already_delta``) reports that compaction, found by
    the backup carrying the job's ``note``.
    """
    k = rt.snapshot_frequency
    if dry_run:
        return dry_run_compact(rt.config.database, thread_id, snapshot_frequency=k, integrity=integrity)
    report = compact_thread(rt.config.database, thread_id, snapshot_frequency=k, integrity=integrity, note=note)
    if retried and report.status == "already_delta":
        mine = [b for b in list_backups(rt.config.database, thread_id) if b.note == note and b.status == "active"]
        if mine:
            report.status, report.backup_id = "compacted", mine[0].backup_id
            report.hint = "Compacted by an earlier attempt of this job whose worker stopped before recording it."
    return report


@dataclass(frozen=True)
class CompactionTotals:
    """Sums over the threads that need (or got) compaction: counts, bytes, snapshot positions."""

    threads: int
    bytes_before: int
    bytes_after: int
    bytes_freed: int
    snapshots: int


def totals(reports: Iterable[ThreadReport], statuses: tuple[str, ...] = ("needs_compaction", "compacted")
           ) -> CompactionTotals:
    """The :class:`CompactionTotals` of the reports with one of ``statuses``."""
    rows = [r for r in reports if r.status in statuses]
    return CompactionTotals(len(rows), sum(r.bytes_before for r in rows), sum(r.bytes_after for r in rows),
                            sum(r.bytes_freed for r in rows), sum(len(r.snapshot_positions) for r in rows))


@dataclass(frozen=True)
class LegacyEstimate:
    """What compacting every legacy thread would free, for the audit's readiness checklist.

    Attributes:
        threads: threads with legacy full storage (classes ``full`` and ``migrated``), from the thread summary.
        bytes_total: their stored bytes now (summary sizes: checkpoints + blobs + writes).
        measured_threads: compaction dry-run rows (and compacted rows) the ratio comes from (count).
        freed_ratio: bytes freed / bytes before over those rows, or ``None`` when nothing was measured yet.
        bytes_freed: ``bytes_total * freed_ratio`` (bytes, rounded down), or ``None`` without a measurement.
    """

    threads: int
    bytes_total: int
    measured_threads: int
    freed_ratio: float | None
    bytes_freed: int | None


def legacy_estimate(rt: DashboardRuntime, by_class: dict[str, dict[str, int]] | None = None) -> LegacyEstimate:
    """Bytes the legacy (full and migrated) threads hold and what compaction would free of them.

    Cheap at any fleet size: one ``GROUP BY`` on the thread summary
    (:func:`deerflow.inventory.storage_by_class`) and one aggregate over the
    job rows that measured a compaction (``needs_compaction`` rows of
    compaction dry runs and ``compacted`` rows of compactions, whose
    ``bytes_before``/``bytes_after`` are exact per thread). Their freed
    fraction is applied to the legacy bytes: an estimate, exact only for
    threads shaped like the measured ones; run a dry run of the matching
    threads for the exact figure.

    Args:
        rt: the dashboard runtime (its saver).
        by_class: :func:`deerflow.inventory.storage_by_class` already read by the caller (the audit
            reads it once for the census, the storage totals and this), or ``None`` to read it here.
    """
    by_class = by_class if by_class is not None else inventory.storage_by_class(rt.saver)
    legacy = [by_class["full"], by_class["migrated"]]
    sums = ThreadResult.objects.filter(
        Q(job__kind=ConversionJob.Kind.COMPACT_DRY_RUN, status="needs_compaction")
        | Q(job__kind=ConversionJob.Kind.COMPACT, status="compacted")
    ).aggregate(n=Count("id"), before=Sum("bytes_before"), after=Sum("bytes_after"))
    before, after = sums["before"] or 0, sums["after"] or 0
    ratio = (before - after) / before if before else None
    total = sum(g["bytes_total"] for g in legacy)
    return LegacyEstimate(threads=sum(g["threads"] for g in legacy), bytes_total=total, measured_threads=sums["n"],
                          freed_ratio=ratio, bytes_freed=int(total * ratio) if ratio is not None else None)
