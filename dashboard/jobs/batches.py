"""Fill a running job's free slots with batches of queued rows and finish it when nothing is left (:func:`claim_batch`).

A job's threads go to the workers in batches: one ``jobs.run_threads`` task runs several rows, one after
another, each claimed, run and recorded on its own exactly as a task of one row would (so progress, pause and
cancel act between threads, and per-thread results are unchanged). A batch is sized by the threads' stored
bytes as the thread summary last counted them (:func:`deerflow.inventory.stored_bytes`): at most
``DASHBOARD_BATCH_BYTES`` bytes and ``DASHBOARD_BATCH_THREADS`` threads, and a thread the summary does not
know yet goes alone. So small threads do not each pay a broker round trip, and a batch stays within what one
task may take (the task time limit). ``max_in_flight`` counts tasks; the pending rows are spread over the
free slots so every slot gets work. A throttled job (``throttle_delay_s`` > 0) sends one row per task, each
after its delay.

Rows of one task share ``batch`` (the id of its first row), which is how the in-flight tasks are counted and
how a dead worker's unstarted rows are found (:func:`dashboard.jobs.stalls.recover_abandoned`).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass, field
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.progress import succeeded
from dashboard.jobs.signals import job_finished
from dashboard.runtime import get_runtime
from deerflow import inventory

__all__ = ["Batch", "Send", "claim_batch"]

log = logging.getLogger("dashboard.jobs")
Job, Result, State, Kind = ConversionJob, ThreadResult, ConversionJob.State, ConversionJob.Kind


# -- dispatch ----------------------------------------------------------------
class Send(NamedTuple):
    """One ``jobs.run_threads`` task to send: its rows, in the order they run, and its countdown (seconds)."""

    result_ids: tuple[int, ...]
    countdown: float


@dataclass
class Batch:
    """What :func:`claim_batch` decided: the tasks to send now, and the job state."""

    job_id: int
    sends: list[Send] = field(default_factory=list)
    state: str = ""


def claim_batch(job_id: int) -> Batch:
    """Move pending rows to ``queued``, in tasks up to ``max_in_flight`` in flight, and finish the job when
    nothing is left.

    Runs under the job row's write lock (the ``revision`` UPDATE), so two dispatchers never both fill the
    same free slots. Countdowns stagger a throttled job's sends by ``throttle_delay_s``; the first thread of
    a job starts at once.

    Returns:
        :class:`Batch`; ``state`` is ``"missing"`` when there is no such job.
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


def _tasks_in_flight(job: ConversionJob) -> int:
    """Tasks queued or running: one per batch, one per row sent without one."""
    groups = job.results.filter(status__in=Result.IN_FLIGHT).values("batch").annotate(n=Count("id")).order_by()
    return sum(g["n"] if g["batch"] is None else 1 for g in groups)


def _fill_slots(job: ConversionJob) -> list[Send]:
    busy = _tasks_in_flight(job)
    free = max(job.max_in_flight - busy, 0)
    if not free:
        return []
    delay = job.throttle_delay_s
    per_task = 1 if delay > 0 else settings.DASHBOARD_BATCH_THREADS
    rows = list(job.results.filter(status=Result.PENDING).order_by("id").values_list("id", "thread_id")
                [:free * per_task])
    started = busy or job.results.exclude(status__in=Result.OPEN).exists()
    sends = [Send(ids, (i + (1 if started else 0)) * delay) for i, ids in enumerate(_group(rows, free, per_task))]
    now = timezone.now()
    for send in sends:  # queued_at: when the task falls due (dashboard.jobs.stalls)
        Result.objects.filter(id__in=send.result_ids, status=Result.PENDING).update(
            status=Result.QUEUED, queued_at=now + dt.timedelta(seconds=send.countdown), batch=send.result_ids[0])
    return sends


def _group(rows: list[tuple[int, str]], tasks: int, per_task: int) -> list[tuple[int, ...]]:
    """Up to ``tasks`` batches of ``rows`` in order, each within the byte budget and the thread cap, and spread
    so that every task gets a share (a thread of unknown size goes alone)."""
    if per_task == 1 or len(rows) <= 1:
        return [(rid,) for rid, _ in rows[:tasks]]
    budget = settings.DASHBOARD_BATCH_BYTES
    sizes = _stored_bytes([t for _, t in rows])
    cap = min(per_task, max(math.ceil(len(rows) / tasks), 1))
    groups: list[tuple[int, ...]] = []
    current: list[int] = []
    used = 0
    for rid, thread_id in rows:
        size = sizes.get(thread_id, budget)
        if current and (len(current) >= cap or used + size > budget):
            groups.append(tuple(current))
            current, used = [], 0
            if len(groups) == tasks:
                return groups
        current.append(rid)
        used += size
    if current:
        groups.append(tuple(current))
    return groups


def _stored_bytes(thread_ids: list[str]) -> dict[str, int]:
    """The summary's sizes of ``thread_ids``; none when the checkpoint database cannot answer (every thread
    then goes alone, as before batching)."""
    try:
        return inventory.stored_bytes(get_runtime().saver, thread_ids)
    except Exception as exc:  # noqa: BLE001 - a sizing hint must never stop a job from moving on
        log.warning("thread sizes unavailable (%s: %s); sending one thread per task", type(exc).__name__, exc)
        return {}


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
