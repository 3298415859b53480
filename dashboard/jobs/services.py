"""Conversion jobs: create, launch, dispatch, run one thread, pause, resume, cancel, retry, revert.

The one domain module behind the pages, the JSON API, the Celery tasks and
the ``convert_threads`` command. The unit of work is a :class:`ThreadResult`
row; :func:`run_thread` is the only code that converts a thread, whoever
calls it:

* Celery: :func:`launch` sends ``jobs.dispatch``; :func:`claim_batch` moves
  pending rows to ``queued`` under the job's row lock, in batches sized by bytes,
  up to ``max_in_flight`` tasks; each ``jobs.run_threads`` task calls
  :func:`run_thread` for each of its rows in turn, then :func:`claim_batch` again
  for the next batch (a throttled job: one row per task, countdown = throttle).
* The command: :func:`run_inline` does the same loop in its own process.

:func:`run_thread` claims its row with a conditional UPDATE (a process that
loses the race does nothing), acts only while the job is ``running`` (pause
and cancel take effect between threads), and records the
``deerflow.convert`` report, or a refusal, or an error, as data on the row.
Only a row claimed with the same claim number (``attempts``) can be
recorded, so a slow duplicate never overwrites a newer attempt.
"""

from __future__ import annotations

import logging
from typing import Any

import kombu.exceptions
import redis.exceptions
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from dashboard.errors.jobs import InvalidTransition
from dashboard.jobs import dispatching, kinds, reclaiming, stalls
from dashboard.jobs.batches import Batch, claim_batch
from dashboard.jobs.creation import JobOptions, active_backups, create_job, is_finished_dry_run
from dashboard.jobs.inline import run_inline
from dashboard.jobs.models import ConversionJob, Kind, State, ThreadResult
from dashboard.jobs.progress import succeeded
from dashboard.jobs.running import Run, record_batch_failure, record_failure, run_thread, run_threads, unqueue

__all__ = [
    "Batch", "JobOptions", "Run", "active_backups", "cancel", "claim_batch", "create_job", "is_finished_dry_run",
    "launch", "pause", "record_batch_failure", "record_failure", "resume", "retry", "revert", "run_inline",
    "run_thread", "run_threads", "unqueue",
]

log = logging.getLogger("dashboard.jobs")

# -- launch -------------------------------------------------------------------
def launch(job: ConversionJob) -> None:
    """Start a Celery job once the surrounding transaction commits (inline jobs: see :func:`run_inline`).

    A broker that cannot be reached pauses the job (resume it once the
    broker is back) and the broker's error propagates, so pages and the API
    answer 503 with its hint (``dashboard.errors.outages``) instead of leaving a
    job ``queued`` that nothing will ever start.
    """
    if job.runner == "celery":
        transaction.on_commit(lambda: _send_dispatch(job.pk))


def _send_dispatch(job_id: int) -> None:
    try:
        dispatching.send(job_id)
    except (kombu.exceptions.OperationalError, redis.exceptions.ConnectionError) as exc:
        ConversionJob.objects.filter(pk=job_id, state__in=(State.QUEUED, State.RUNNING)).update(
            state=State.PAUSED, revision=F("revision") + 1)
        # A job still resolving its filter has no threads to resume: it is cancelled; launch it again.
        ConversionJob.objects.filter(pk=job_id, state=State.RESOLVING).update(
            state=State.CANCELLED, finished_at=timezone.now(), revision=F("revision") + 1)
        log.warning("job %s paused: the broker cannot be reached (%s); resume it once the broker is back",
                    job_id, exc)
        raise


# -- operator actions --------------------------------------------------------
def _transition(job: ConversionJob, sources: tuple[str, ...], target: str, verb: str) -> None:
    n = ConversionJob.objects.filter(pk=job.pk, state__in=sources).update(state=target, revision=F("revision") + 1)
    if not n:
        job.refresh_from_db(fields=["state"])
        raise InvalidTransition(f"Job {job.pk} is {job.get_state_display()}; it cannot be {verb}.")


def pause(job: ConversionJob) -> ConversionJob:
    """Stop starting threads; threads already running finish. Queued ones go back to pending.

    Raises:
        InvalidTransition: the job is not queued or running.
    """
    with transaction.atomic():
        _transition(job, (State.QUEUED, State.RUNNING), State.PAUSED, "paused")
        job.results.filter(status=ThreadResult.QUEUED).update(status=ThreadResult.PENDING)
    job.refresh_from_db()
    return job


def resume(job: ConversionJob) -> ConversionJob:
    """Continue a paused job on the Celery workers (also one paused while the command ran it).

    Raises:
        InvalidTransition: the job is not paused.
    """
    with transaction.atomic():
        _transition(job, (State.PAUSED,), State.RUNNING, "resumed")
        ConversionJob.objects.filter(pk=job.pk).update(runner="celery")
        job.refresh_from_db()
        launch(job)
    return job


def cancel(job: ConversionJob) -> ConversionJob:
    """Skip every thread that has not started; the job is cancelled when running ones finish.

    Cancelling again a job still ``cancelling`` is allowed: a thread whose worker is gone is skipped
    (:func:`dashboard.jobs.stalls.recover_abandoned`), so the job ends.

    Raises:
        InvalidTransition: the job already finished.
    """
    with transaction.atomic():
        _transition(job, (State.RESOLVING, State.QUEUED, State.RUNNING, State.PAUSED, State.CANCELLING),
                    State.CANCELLING, "cancelled")
        job.results.filter(status__in=(ThreadResult.PENDING, ThreadResult.QUEUED)).update(
            status=ThreadResult.SKIPPED, error="Cancelled before it ran.", finished_at=timezone.now())
    stalls.recover_abandoned(_never_sent, job=job)
    claim_batch(job.pk)
    job.refresh_from_db()
    return job


def _never_sent(result_id: int) -> None:
    raise AssertionError(f"a cancelling job's row {result_id} is never sent again")


def retry(job: ConversionJob, user: Any) -> ConversionJob:
    """A new job, linked to ``job``, re-running only its failed threads with the same arguments.

    Raises:
        InvalidTransition: the job has not finished, or nothing failed.
    """
    failed = [r for r in job.results.all() if r.status not in (ThreadResult.SKIPPED, *ThreadResult.OPEN)
              and not succeeded(job.kind, r.status)]
    if not job.finished or not failed:
        raise InvalidTransition(f"Job {job.pk} has no failed thread to retry (state {job.state}).")
    spec = kinds.get(job.kind)
    if spec.selects == kinds.Selects.DATABASE:  # one row, the database: the same vacuum again
        new = reclaiming.create_reclaim_job(user, full=bool(job.reclaim.get("full")), source_job=job.source_job,
                                            launched_by=job.launched_by if user is None else "")
        new.parent = job
        new.save(update_fields=["parent"])
        launch(new)
        return new
    chosen = ({"backup_ids": [r.backup_id for r in failed]} if spec.selects == kinds.Selects.BACKUPS
              else {"thread_ids": [r.thread_id for r in failed]})
    new = create_job(user, job.kind, chosen, JobOptions(
        source_job=job.source_job, parent=job, throttle_delay_s=job.throttle_delay_s,
        max_in_flight=job.max_in_flight, integrity=job.integrity, confirmed=job.confirmed,
        size_limit_bytes=job.size_limit_bytes, retention=job.retention or None,
        launched_by=job.launched_by if user is None else "",
        acknowledge_branch_ambiguous=job.acknowledge_branch_ambiguous))
    launch(new)
    return new


def revert(job: ConversionJob, user: Any) -> ConversionJob:
    """A revert job restoring every thread ``job`` rewrote, from the backups it wrote.

    Raises:
        InvalidTransition: ``job`` is not a finished conversion, compaction or prune.
        NothingToConvert: it rewrote nothing.
    """
    if not kinds.get(job.kind).revertible or not job.finished:
        raise InvalidTransition(f"Job {job.pk} is not a finished conversion; there is nothing to revert yet.")
    new = create_job(user, Kind.REVERT, None, JobOptions(source_job=job, throttle_delay_s=job.throttle_delay_s,
                                                         max_in_flight=job.max_in_flight))
    launch(new)
    return new
