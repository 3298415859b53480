"""Fill a running job's free slots with queued rows and finish it when nothing is left (:func:`claim_batch`)."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.progress import succeeded
from dashboard.jobs.signals import job_finished

__all__ = ["Batch", "claim_batch"]

log = logging.getLogger("dashboard.jobs")
Job, Result, State, Kind = ConversionJob, ThreadResult, ConversionJob.State, ConversionJob.Kind


# -- dispatch ----------------------------------------------------------------
@dataclass
class Batch:
    """What :func:`claim_batch` decided: rows to send now with their countdowns (seconds), and the job state."""

    job_id: int
    sends: list[tuple[int, float]] = field(default_factory=list)
    state: str = ""


def claim_batch(job_id: int) -> Batch:
    """Move pending rows to ``queued`` up to ``max_in_flight``, and finish the job when nothing is left.

    Runs under the job row's write lock (the ``revision`` UPDATE), so two
    dispatchers never both fill the same free slots. Countdowns stagger the
    sends by ``throttle_delay_s``; the first thread of a job starts at once.
    """
    with transaction.atomic():
        if not Job.objects.filter(pk=job_id).update(revision=F("revision") + 1):
            return Batch(job_id, state="missing")
        job = Job.objects.get(pk=job_id)
        if job.state == State.QUEUED:
            job.state, job.started_at = State.RUNNING, job.started_at or timezone.now()
            job.save(update_fields=["state", "started_at"])
        sends = _fill_slots(job) if job.state == State.RUNNING else []
        _finish_if_done(job)
    return Batch(job_id, sends, job.state)


def _fill_slots(job: ConversionJob) -> list[tuple[int, float]]:
    in_flight = job.results.filter(status__in=Result.IN_FLIGHT).count()
    free = max(job.max_in_flight - in_flight, 0)
    ids = list(job.results.filter(status=Result.PENDING).order_by("id").values_list("id", flat=True)[:free])
    started = in_flight or job.results.exclude(status__in=Result.OPEN).exists()
    delay = job.throttle_delay_s
    sends = [(rid, (i + (1 if started else 0)) * delay) for i, rid in enumerate(ids)]
    now = timezone.now()
    for rid, countdown in sends:  # queued_at: when the task falls due (dashboard.jobs.stalls)
        Result.objects.filter(id=rid, status=Result.PENDING).update(
            status=Result.QUEUED, queued_at=now + dt.timedelta(seconds=countdown))
    return sends


def _finish_if_done(job: ConversionJob) -> None:
    counts = dict(job.results.values_list("status").annotate(n=Count("id")).order_by())
    open_rows = sum(counts.get(s, 0) for s in Result.OPEN)
    if job.state == State.RUNNING and not open_rows:
        job.state = _final_state(job.kind, counts)
    elif job.state == State.CANCELLING and not counts.get(Result.RUNNING):
        job.results.filter(status__in=(Result.PENDING, Result.QUEUED)).update(status=Result.SKIPPED)
        job.state = State.CANCELLED
    else:
        return
    job.finished_at = timezone.now()
    job.save(update_fields=["state", "finished_at"])
    job_finished.send(sender=ConversionJob, job=job)  # e.g. a policy's run that pruned nothing keeps no job


def _final_state(kind: str, counts: dict[str, int]) -> str:
    ok = sum(n for s, n in counts.items() if succeeded(kind, s))
    failed = sum(counts.values()) - ok - counts.get(Result.SKIPPED, 0)
    if not failed:
        return State.SUCCEEDED
    return State.FAILED if not ok else State.PARTIALLY_FAILED
