"""The compaction kinds: ``compact_dry_run`` (preview) and ``compact`` (full to delta, dashboard.jobs.compaction)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.jobs import compaction
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

if TYPE_CHECKING:
    from dashboard.jobs.models import ThreadResult
    from dashboard.runtime import DashboardRuntime

__all__ = ["COMPACT", "COMPACT_DRY_RUN"]


def _compact(rt: DashboardRuntime, result: ThreadResult, note: str, *, dry_run: bool = False) -> Outcome:
    return Outcome(compaction.run_one(rt, result.thread_id, dry_run=dry_run, integrity=result.job.integrity,
                                      note=note, retried=result.attempts > 1))


def _compact_dry_run(rt: DashboardRuntime, result: ThreadResult, note: str) -> Outcome:
    return _compact(rt, result, note, dry_run=True)


COMPACT_DRY_RUN = JobKind(
    name=Kind.COMPACT_DRY_RUN, permission=MANAGE_CONVERSIONS, worker_mode=WorkerMode.DELTA, writes_threads=False,
    selects=Selects.DELTA_THREADS, dispatch=_compact_dry_run, success=("needs_compaction", "already_delta"),
    words=Words(totals="would be rewritten", needed="compaction", chart="Shrink per thread"),
    dry_run_of=Kind.COMPACT, growth_chart=True, preview_template="jobs/_compact_estimate.html")

COMPACT = JobKind(
    name=Kind.COMPACT, permission=MANAGE_CONVERSIONS, worker_mode=WorkerMode.DELTA, writes_threads=True,
    selects=Selects.DELTA_THREADS, dispatch=_compact, success=("compacted", "already_delta"),
    words=Words(written="compacted", needed="compaction",
                undone="After it, these threads are stored in full mode again and take the space listed above."),
    estimated_by=Kind.COMPACT_DRY_RUN,
    would_write=("needs_compaction",), written=("compacted",), committed_status="compacted",
    confirmation=Confirmation("jobs:confirm", "jobs:compact", "jobs/compact_confirm.html"), offers_reclaim=True,
    needs_delta_fleet=True)
