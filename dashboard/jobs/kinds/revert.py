"""The ``revert`` kind: restore threads from the backups a conversion, compaction or prune wrote.

A revert is the business of the job that wrote its backups: acting on it, or
on those backups, needs that job's kind's permission
(:func:`dashboard.jobs.kinds.permissions.backup_permissions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.jobs import pruning
from dashboard.jobs.kinds.base import MANAGE_CONVERSIONS, JobKind, Outcome, Selects, Words, WorkerMode
from dashboard.jobs.models import ConversionJob
from deerflow import convert

if TYPE_CHECKING:
    from dashboard.jobs.models import ThreadResult
    from dashboard.runtime import DashboardRuntime

__all__ = ["REVERT"]


def _revert(rt: DashboardRuntime, result: ThreadResult, note: str) -> Outcome:
    if pruning.is_prune_backup(result.backup_id):  # a whole-thread backup: restored by retention's own revert
        report, lists = pruning.revert_one(rt, result.backup_id)
        return Outcome(report, prune=lists)
    return Outcome(convert.revert_thread(rt.config.database, result.backup_id))


#: ``permission`` is the fallback of a backup no job of this dashboard wrote (nor a prune's note names).
REVERT = JobKind(
    name=ConversionJob.Kind.REVERT, permission=MANAGE_CONVERSIONS, worker_mode=WorkerMode.DELTA,
    writes_threads=True, selects=Selects.BACKUPS, dispatch=_revert, success=("reverted",),
    permission_from_source=True, words=Words(totals="restored"))
