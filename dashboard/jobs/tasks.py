"""Celery tasks for conversion jobs: thin wrappers over :mod:`dashboard.jobs.services`.

* ``jobs.dispatch(job_id)`` (queue ``dashboard``, any worker): resolves a
  ``resolving`` job's filter into its rows (:mod:`dashboard.jobs.resolving`), then claims pending
  threads in batches sized by bytes (:mod:`dashboard.jobs.batches`) and sends one ``jobs.run_threads``
  per batch, up to ``max_in_flight``.
* ``jobs.requeue_stalled()`` (beat, every minute): sends again the rows whose
  message the broker lost (:mod:`dashboard.jobs.stalls`), and deletes this dashboard's DeerFlow
  reservations whose lease expired (:func:`dashboard.jobs.reservations.release_expired`; a worker
  does the same at start-up).
* ``jobs.run_due_policies()`` (beat, every minute): starts a prune job for each
  enabled retention policy whose crontab fell due (:mod:`dashboard.jobs.policies`).
* ``jobs.run_threads(result_ids)`` (queue ``checkpoints.delta``: converting
  reads delta history, so only delta-mode workers consume it): runs a batch's
  threads one after another via :func:`services.run_threads`, then dispatches
  the next batch (a throttled job's: one thread, ``countdown = throttle_delay_s``).
* ``jobs.run_thread(result_id)`` (same queue): one row, as the sweeps send a
  lost row again (:mod:`dashboard.jobs.stalls`).

Policy: late acknowledgement and ``reject_on_worker_lost``, so a worker
killed mid-thread leaves the message to be redelivered (the thread's own
transaction rolled back with the dead connection); a redelivered task
reclaims its row. Only :class:`TransientDatabaseError` (psycopg
``OperationalError``, SQLite ``database is locked``) is retried; expected
failures are outcomes recorded on the row, never exceptions.
"""

from __future__ import annotations

from celery import Task, shared_task
from django.conf import settings

from dashboard.celery import THREAD_QUEUE
from dashboard.errors.jobs import TransientDatabaseError
from dashboard.jobs import policies, reservations, resolving, services, stalls

__all__ = ["THREAD_QUEUE", "dispatch", "requeue_stalled", "run_due_policies", "run_thread", "run_threads",
           "send_again", "send_batch"]


_POLICY = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (TransientDatabaseError,),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 5,
}


def send_batch(batch: services.Batch) -> None:
    """Send ``jobs.run_threads`` for each claimed batch; the rows of a batch whose send fails go back to pending.

    Raises:
        Whatever the broker's send raised (the batches sent before it stay queued).
    """
    for send in batch.sends:
        try:
            run_threads.apply_async((list(send.result_ids),), queue=THREAD_QUEUE, countdown=send.countdown or None)
        except Exception:
            services.unqueue(*send.result_ids)
            raise


class ThreadTask(Task):
    """Records a thread task that failed for good on its row (as data), and moves the job on."""

    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:  # noqa: D102 - see class docstring
        if not args:
            return
        ids = args[0] if isinstance(args[0], list) else [args[0]]
        job_id = services.record_batch_failure(ids, exc)
        if job_id is not None:
            send_batch(services.claim_batch(job_id))


@shared_task(name="jobs.dispatch", **_POLICY)
def dispatch(job_id: int) -> dict:
    """Start (or resume) a job: resolve its filter if it is ``resolving``, then send its first threads.

    Returns ``{"job_id", "state", "sent"}``.
    """
    resolving.resolve(job_id)
    batch = services.claim_batch(job_id)
    send_batch(batch)
    return {"job_id": job_id, "state": batch.state, "sent": len(batch.sends)}


@shared_task(bind=True, base=ThreadTask, name="jobs.run_threads", **_POLICY)
def run_threads(self, result_ids: list[int]) -> dict:
    """Run a batch of a job's threads in turn, then send the next batch.

    Returns ``{"result_ids", "statuses": [one per row that exists], "ran": rows this task ran}``.
    """
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    runs = services.run_threads(result_ids, reclaim=redelivered, worker_node=self.request.hostname or "")
    for job_id in sorted({run.result.job_id for run in runs}):
        send_batch(services.claim_batch(job_id))
    return {"result_ids": result_ids, "statuses": [run.result.status for run in runs],
            "ran": sum(run.ran for run in runs)}


@shared_task(bind=True, base=ThreadTask, name="jobs.run_thread", **_POLICY)
def run_thread(self, result_id: int) -> dict:
    """Run one thread of a job, then send the next. Returns ``{"result_id", "status", "ran"}``."""
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    run = services.run_thread(result_id, reclaim=redelivered, worker_node=self.request.hostname or "")
    send_batch(services.claim_batch(run.result.job_id))
    return {"result_id": result_id, "status": run.result.status, "ran": run.ran}


def send_again(result_id: int) -> None:
    """Send ``jobs.run_thread`` once more for a row whose message the broker lost (:mod:`dashboard.jobs.stalls`)."""
    run_thread.apply_async((result_id,), queue=THREAD_QUEUE)


@shared_task(name="jobs.requeue_stalled")
def requeue_stalled() -> dict:
    """Release the rows of dead workers, send again the rows queued ``DASHBOARD_REQUEUE_AFTER_S`` past their due
    time, and release this dashboard's expired DeerFlow reservations. Returns ``{"sent": [ids], "abandoned": [ids
    sent again], "ended": [ids failed or skipped], "released": [run ids]}``."""
    recovery = stalls.recover_abandoned(send_again)
    for job_id in sorted(recovery.jobs):
        send_batch(services.claim_batch(job_id))
    return {"sent": stalls.requeue_stalled(settings.DASHBOARD_REQUEUE_AFTER_S, send_again),
            "abandoned": recovery.sent, "ended": recovery.ended, "released": reservations.release_expired()}


@shared_task(name="jobs.run_due_policies")
def run_due_policies() -> dict:
    """Start the due retention policies' prune jobs. Returns ``{"ran": [{"policy", "job_id", "error"}]}``."""
    return {"ran": policies.run_due_policies()}
