"""A writing job beside a live DeerFlow: DeerFlow's ``checkpoint_write`` reservation around each thread's
rewrite, the purge of DeerFlow's history cache after it, and the sweep of reservations a killed worker left.

:func:`dashboard.jobs.running.run_thread` is the one caller of :func:`hold` and :func:`after_rewrite` for
jobs (the ``prune_threads`` and ``revert_prune`` commands, which rewrite in their own process without a job,
take :func:`hold_thread` the same way):

* kinds whose ``writes_threads`` is true (:mod:`dashboard.jobs.kinds`: convert, compact, prune and
  delete-threads, revert of any kind) run their thread inside
  :func:`hold` (:func:`deerflow.storage.reservation.reserve_checkpoint_write`); dry runs and reclaims take no
  reservation;
* a thread DeerFlow holds (a run pending or running) is tried :data:`TRIES` times a few seconds apart, then
  recorded ``run_in_flight`` with the run's id and age (:func:`in_flight`), rows untouched; retrying the
  job runs it once DeerFlow's run has finished;
* after a committed rewrite, while the reservation still holds the thread, its Redis history-cache entries
  are purged
  (:func:`deerflow.runtime.checkpoint_cache.purge_thread`) and what was done is recorded on the row
  (``ThreadResult.deerflow``).

:func:`release_expired` (the beat's stalled-job sweep, ``jobs.requeue_stalled``, and every worker at
start-up) deletes this dashboard's reservations whose lease expired: a SIGKILLed worker's row holds the
thread at most one lease plus one sweep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from celery.signals import worker_ready
from django.conf import settings

from dashboard.formatting import plural
from dashboard.runtime import DashboardRuntime, get_runtime
from deerflow.convert import ThreadReport
from deerflow.runtime.checkpoint_cache import purge_thread
from deerflow.storage import Reservation, RunInFlightError, owner_id, reserve_checkpoint_write
from deerflow.storage import release_expired as _release_expired

__all__ = ["COMMITTED", "IN_FLIGHT_HINT", "RUN_IN_FLIGHT", "TRIES", "after_rewrite", "hold",
           "hold_thread", "in_flight", "release_expired"]

log = logging.getLogger("dashboard.jobs")

#: The result status of a thread DeerFlow held (a run pending or running on it): not touched.
RUN_IN_FLIGHT = "run_in_flight"
#: Result statuses of a committed rewrite (the thread's stored checkpoints changed).
COMMITTED = ("converted", "compacted", "pruned", "deleted", "reverted")
#: Reservation attempts on a held thread before it is recorded ``run_in_flight``, and the waits between them (s).
TRIES, WAITS_S = 3, (1.0, 2.0)

IN_FLIGHT_HINT = ("DeerFlow is running this thread (its run holds the thread in DeerFlow's runs table), so the "
                  "thread was not touched. Retry the job once the run has finished; a run stuck in pending or "
                  "running is errored out by DeerFlow's own recovery when its lease expires.")


@contextmanager
def hold(rt: DashboardRuntime, result: Any, *, sleep: Callable[[float], None] = time.sleep
         ) -> Iterator[Reservation | None]:
    """DeerFlow's ``checkpoint_write`` reservation on a job row's thread for the block (see :func:`hold_thread`)."""
    metadata = {"checkpoint_admin": {"job_id": result.job_id, "result_id": result.pk, "kind": result.job.kind}}
    with hold_thread(rt, result.thread_id, node=result.worker_node or "", metadata=metadata, sleep=sleep) as held:
        yield held


@contextmanager
def hold_thread(rt: DashboardRuntime, thread_id: str, *, node: str, metadata: dict[str, Any],
                sleep: Callable[[float], None] = time.sleep) -> Iterator[Reservation | None]:
    """DeerFlow's ``checkpoint_write`` reservation on ``thread_id`` for the block (``None`` without DeerFlow's
    tables), owned by ``checkpoint-admin:<host>:<pid>:<node>``.

    Raises:
        RunInFlightError: DeerFlow still held the thread after :data:`TRIES` attempts.
        StorageError: the database could not be written (a transient one is retried by the task's policy).
    """
    owner = owner_id(node)
    for attempt in range(TRIES):
        try:
            with reserve_checkpoint_write(rt.config.database, thread_id, owner=owner, metadata=metadata,
                                          lease_s=settings.DASHBOARD_RESERVATION_LEASE_S) as held:
                yield held
                return
        except RunInFlightError:
            if attempt == TRIES - 1:
                raise
            sleep(WAITS_S[min(attempt, len(WAITS_S) - 1)])


def in_flight(thread_id: str, exc: RunInFlightError) -> tuple[ThreadReport, dict[str, Any]]:
    """The row of a thread DeerFlow held: ``(report with status run_in_flight, {"run_in_flight": run})``."""
    run = exc.run.as_dict() if exc.run is not None else None
    report = ThreadReport(thread_id=thread_id, status=RUN_IN_FLIGHT, error=str(exc), hint=IN_FLIGHT_HINT)
    return report, {"run_in_flight": run}


def after_rewrite(rt: DashboardRuntime, thread_id: str, status: str, held: Reservation | None) -> dict[str, Any]:
    """What the row records of DeerFlow's side: the reservation held, and the cache purge after a commit.

    Returns:
        ``{"reservation": {"run_id", "renewals", "lost"} | None, "cache_purge": {"type", "key_prefix",
        "keys_deleted", "error"} | None}`` (``cache_purge`` ``None`` when nothing was committed).
    """
    purge = purge_thread(rt.config.database, thread_id).as_dict() if status in COMMITTED else None
    reservation = ({"run_id": held.run_id, "renewals": held.renewals, "lost": held.lost}
                   if held is not None else None)
    return {"reservation": reservation, "cache_purge": purge}


def release_expired() -> list[str]:
    """Delete this dashboard's expired reservations from DeerFlow's ``runs`` (never DeerFlow's rows); any
    failure is logged and answers ``[]`` (the next sweep tries again).

    Returns:
        The run ids deleted.
    """
    try:
        return _release_expired(get_runtime().config.database)
    except Exception:  # noqa: BLE001 - a sweep must never fail the beat task it rides on
        log.exception("could not sweep expired DeerFlow reservations")
        return []


@worker_ready.connect(weak=False)
def _sweep_at_start(**_: Any) -> None:
    """A worker starting up releases the reservations its killed predecessor left (after their lease)."""
    gone = release_expired()
    if gone:
        log.warning("worker start-up released %s", plural(gone, "expired DeerFlow reservation"))
