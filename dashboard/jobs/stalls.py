"""Thread tasks the broker lost: rows ``queued`` for too long are sent again.

A row is ``queued`` from the moment its ``jobs.run_thread`` task is sent
until a worker claims it. If the broker loses the message (a Redis without
persistence restarted, a queue purged by hand), no worker will ever claim
the row, its slot counts as in flight for ever and the job never finishes.

:func:`requeue_stalled` finds Celery jobs' rows that have been queued for
longer than a threshold past their due time (``queued_at``: send time plus
countdown) and sends one task per row again, through the caller's ``send``
(the beat task ``jobs.requeue_stalled`` and the ``requeue_stalled_threads``
command both pass ``jobs.run_thread``). Sending twice is safe: a worker claims a row only
while it is ``queued`` (``dashboard.jobs.running._claim``), so a duplicate finds it taken
and does nothing. The threshold must exceed how long a message may wait in
a busy queue, or a healthy backlog gets duplicate (harmless, no-op) tasks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from django.utils import timezone

from dashboard.jobs.models import ConversionJob, ThreadResult

__all__ = ["requeue_stalled", "stalled_rows"]


def _stalled(older_than_s: float, now: dt.datetime, job: ConversionJob | None = None):
    cutoff = now - dt.timedelta(seconds=older_than_s)
    rows = ThreadResult.objects.filter(
        status=ThreadResult.QUEUED, job__state=ConversionJob.State.RUNNING, job__runner="celery",
        queued_at__lte=cutoff)
    return rows if job is None else rows.filter(job=job)


def stalled_rows(older_than_s: float, job: ConversionJob | None = None) -> int:
    """How many rows (of ``job``, else of every running Celery job) are still ``queued`` ``older_than_s``
    seconds or more past their due time (count)."""
    return _stalled(older_than_s, timezone.now(), job).count()


def requeue_stalled(older_than_s: float, send: Callable[[int], None]) -> list[int]:
    """Send again, with ``send(result_id)``, each row still ``queued`` ``older_than_s`` seconds past its due time.

    Only rows of ``running`` jobs whose runner is Celery: a paused job's queued
    rows went back to pending, and a job the command runs in its own process
    (``convert_threads``) sends no messages. Each row sent has its
    ``queued_at`` moved to now, so the next sweep waits a whole threshold
    again; a row whose send raised keeps its old ``queued_at`` and is found
    again by the next sweep.

    Args:
        older_than_s: seconds a row may stay ``queued`` past its due time before its
            message is presumed lost (``DASHBOARD_REQUEUE_AFTER_S``, default 600).
        send: sends ``jobs.run_thread`` for one row id (raises when the broker is unreachable).

    Returns:
        The ids sent, in row order.

    Raises:
        ValueError: ``older_than_s`` is negative.
        Whatever ``send`` raises (the rows sent before it stay marked).
    """
    if older_than_s < 0:
        raise ValueError(f"older_than_s must be 0 or more seconds; got {older_than_s}")
    ids = list(_stalled(older_than_s, timezone.now()).order_by("id").values_list("id", flat=True))
    sent = []
    for result_id in ids:
        send(result_id)
        ThreadResult.objects.filter(id=result_id, status=ThreadResult.QUEUED).update(queued_at=timezone.now())
        sent.append(result_id)
    return sent
