"""Filter selections are resolved in a worker, not in the request that launches the job.

A filter may match any number of threads (100,000 or more): paging them
all and writing one :class:`ThreadResult` per thread would hold a web worker
for tens of seconds. So :func:`dashboard.jobs.services.create_job` stores a
Celery job with a filter selection (and no dry run behind it) in state
``resolving`` without rows, having read at most one page to refuse a filter
that surely matches nothing (:func:`dashboard.jobs.selection.filter_may_match`);
the request answers at once. The job's ``jobs.dispatch`` task then calls
:func:`resolve`: it pages the filter (metadata only, so any worker may), and
writes the rows and moves the job to ``queued`` in one transaction guarded by
the state, so a redelivered dispatch (its worker killed mid-resolution) resolves
again from scratch and two dispatches never both write rows. A job cancelled
while resolving is never resolved.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from dashboard.errors.jobs import TransientDatabaseError, is_transient
from dashboard.jobs import selection as sel
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.runtime import get_runtime

__all__ = ["BATCH", "needs_worker", "resolve"]

log = logging.getLogger("dashboard.jobs")
State = ConversionJob.State
#: Result rows written per INSERT.
BATCH = 1000


def needs_worker(selection: dict[str, Any], *, runner: str, source_job: ConversionJob | None) -> bool:
    """A normalized selection the request must not resolve: a filter, for a Celery job without a source job.

    (A conversion estimated from a dry run needs its targets for the estimate; the command resolves in its own
    process, where no request waits.)
    """
    return "filter" in selection and runner == "celery" and source_job is None


def resolve(job_id: int) -> int | None:
    """Resolve a ``resolving`` job's filter into its pending rows and queue it.

    Returns:
        The number of rows written, or ``None`` when the job is not ``resolving`` (already resolved by an
        earlier delivery, cancelled, or unknown). A filter that now matches nothing leaves a job without
        threads, which dispatch finishes as succeeded.

    Raises:
        TransientDatabaseError: the checkpoint or dashboard database is unreachable or locked (the task retries).
    """
    job = ConversionJob.objects.filter(pk=job_id, state=State.RESOLVING).first()
    if job is None:
        return None
    try:
        targets = sel.resolve(get_runtime(), job.selection)
    except Exception as exc:
        if is_transient(exc):
            raise TransientDatabaseError(f"{type(exc).__name__}: {exc}") from exc
        log.exception("job %s: its filter could not be resolved", job_id)
        ConversionJob.objects.filter(pk=job_id, state=State.RESOLVING).update(
            state=State.FAILED, finished_at=timezone.now(), revision=F("revision") + 1)
        return None
    with transaction.atomic():
        if not ConversionJob.objects.filter(pk=job_id, state=State.RESOLVING).update(
                state=State.QUEUED, revision=F("revision") + 1):
            return None
        ThreadResult.objects.bulk_create([ThreadResult(job_id=job_id, thread_id=t, backup_id=b) for t, b in targets],
                                         batch_size=BATCH)
    log.info("job %s: filter resolved to %d threads", job_id, len(targets))
    return len(targets)
