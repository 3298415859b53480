"""The conversion kinds: ``dry_run`` (estimate and integrity check) and ``convert`` (delta to full)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.jobs.kinds.base import (
    MANAGE_CONVERSIONS,
    Confirmation,
    JobKind,
    Outcome,
    Selects,
    Words,
    WorkerMode,
)
from dashboard.jobs.models import Kind
from deerflow import convert

if TYPE_CHECKING:
    from dashboard.jobs.models import ThreadResult
    from dashboard.runtime import DashboardRuntime

__all__ = ["CONVERT", "DRY_RUN"]


def _dry_run(rt: DashboardRuntime, result: ThreadResult, note: str) -> Outcome:
    job = result.job
    return Outcome(convert.dry_run_thread(rt.config.database, result.thread_id, integrity=job.integrity,
                                          acknowledge_branch_ambiguous=job.acknowledge_branch_ambiguous))


def _convert(rt: DashboardRuntime, result: ThreadResult, note: str) -> Outcome:
    job = result.job
    report = convert.convert_thread(rt.config.database, result.thread_id, integrity=job.integrity, note=note,
                                    acknowledge_branch_ambiguous=job.acknowledge_branch_ambiguous)
    return Outcome(_recover_committed(rt, result, report, note))


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


DRY_RUN = JobKind(
    name=Kind.DRY_RUN, permission=MANAGE_CONVERSIONS, worker_mode=WorkerMode.THREAD, writes_threads=False,
    selects=Selects.DELTA_THREADS, dispatch=_dry_run, success=("needs_conversion", "already_full"),
    words=Words(totals="would be rewritten", needed="conversion"), dry_run_of=Kind.CONVERT, growth_chart=True,
    size_limited=True, preview_template="jobs/_estimate.html")

CONVERT = JobKind(
    name=Kind.CONVERT, permission=MANAGE_CONVERSIONS, worker_mode=WorkerMode.THREAD, writes_threads=True,
    selects=Selects.DELTA_THREADS, dispatch=_convert, success=("converted", "already_full"),
    words=Words(written="converted", needed="conversion",
                undone="After it, a full-mode process refuses these threads again (HTTP 409)."),
    estimated_by=Kind.DRY_RUN, size_limited=True,
    would_write=("needs_conversion",), written=("converted",), committed_status="converted",
    confirmation=Confirmation("jobs:confirm", "jobs:convert", "jobs/convert_confirm.html"))
