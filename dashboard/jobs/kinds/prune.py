"""The retention kinds: ``prune_dry_run`` (preview) and ``prune`` (delete history, :mod:`dashboard.jobs.pruning`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.jobs import pruning
from dashboard.jobs.kinds.base import (
    MANAGE_RETENTION,
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

__all__ = ["PRUNE", "PRUNE_DRY_RUN"]


def _prune(rt: DashboardRuntime, result: ThreadResult, note: str, *, dry_run: bool = False) -> Outcome:
    if not dry_run and (adopted := pruning.orphan_refusal(rt, result)) is not None:
        return Outcome(adopted, pruning.NOT_ORPHANED_CODE)
    report, lists = pruning.run_one(rt, result.thread_id, result.job.retention, dry_run=dry_run, note=note,
                                    retried=result.attempts > 1)
    return Outcome(report, prune=lists)


def _prune_dry_run(rt: DashboardRuntime, result: ThreadResult, note: str) -> Outcome:
    return _prune(rt, result, note, dry_run=True)


PRUNE_DRY_RUN = JobKind(
    name=Kind.PRUNE_DRY_RUN, permission=MANAGE_RETENTION, worker_mode=WorkerMode.DELTA, writes_threads=False,
    selects=Selects.ANY_THREADS, dispatch=_prune_dry_run,
    success=("would_prune", "would_delete", "nothing_to_prune"),
    words=Words(totals="would be deleted", needed="pruning"), dry_run_of=Kind.PRUNE, carries_retention=True)

PRUNE = JobKind(
    name=Kind.PRUNE, permission=MANAGE_RETENTION, worker_mode=WorkerMode.DELTA, writes_threads=True,
    selects=Selects.ANY_THREADS, dispatch=_prune, success=("pruned", "deleted", "nothing_to_prune"),
    words=Words(totals="deleted", written="pruned", needed="pruning",
                undone="After it, the pruned checkpoints are back, and the space the prune freed is taken again."),
    estimated_by=Kind.PRUNE_DRY_RUN, would_write=("would_prune", "would_delete"), written=pruning.WRITTEN,
    confirmation=Confirmation("jobs:prune-confirm", "jobs:prune", "jobs/prune_confirm.html"), offers_reclaim=True,
    carries_retention=True)
