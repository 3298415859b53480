"""Celery tasks for threads: thin wrappers over :mod:`dashboard.threads.services` and
:mod:`~dashboard.threads.storage`."""

from __future__ import annotations

import psycopg
from celery import shared_task

from dashboard.runtime import get_runtime
from dashboard.threads import services, storage


@shared_task(acks_late=True, name="threads.materialize_head")
def materialize_head(thread_id: str, checkpoint_ns: str = "") -> dict:
    """Materialize a thread's head on this worker; returns :func:`services.head_digest`'s dict.

    Mode errors are returned as data (``{"error": ..., "hint": ...}``), not raised,
    so the caller sees the spec's text instead of a traceback.
    """
    return services.head_digest(get_runtime(), thread_id, checkpoint_ns)


@shared_task(acks_late=True, name="threads.refresh_summary", autoretry_for=(psycopg.OperationalError,),
             retry_backoff=True, max_retries=3)
def refresh_summary(full: bool = False) -> dict:
    """Bring the thread summary up to date (the periodic beat entries; ``full``: the reconcile).

    Returns :class:`deerflow.inventory.summary.RefreshReport` as a dict. Retried only for
    a lost or refused Postgres connection; an overlapping run is skipped
    (``kind="skipped"``) rather than queued behind the lock. Rows found
    missing below the watermark are recorded, not rebuilt here
    (:func:`dashboard.threads.storage.refresh_inventory` with ``periodic=True``).
    """
    return storage.refresh_inventory(get_runtime(), full=full, periodic=True).as_dict()
