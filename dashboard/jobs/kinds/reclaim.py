"""The ``reclaim`` kind: the space a compaction, prune or purge freed, back to the disk (dashboard.jobs.reclaiming).

One row standing for the whole database (``thread_id`` ``""``); it writes no
thread, so it takes no thread reservation and records no thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.jobs import reclaiming
from dashboard.jobs.kinds.base import MANAGE_CONVERSIONS, JobKind, Outcome, Selects, Words, WorkerMode
from dashboard.jobs.models import ConversionJob

if TYPE_CHECKING:
    from dashboard.jobs.models import ThreadResult
    from dashboard.runtime import DashboardRuntime

__all__ = ["RECLAIM"]


def _reclaim(rt: DashboardRuntime, result: ThreadResult, note: str) -> Outcome:
    return Outcome(reclaiming.run_one(rt, result.job))


RECLAIM = JobKind(
    name=ConversionJob.Kind.RECLAIM, permission=MANAGE_CONVERSIONS, worker_mode=WorkerMode.ANY, writes_threads=False,
    selects=Selects.DATABASE, dispatch=_reclaim, success=(reclaiming.RECLAIMED,), words=Words(totals=""))
