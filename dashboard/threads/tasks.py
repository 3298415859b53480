"""Celery tasks for threads: thin wrappers over :mod:`dashboard.threads.services`."""

from __future__ import annotations

from celery import shared_task

from dashboard.runtime import get_runtime
from dashboard.threads import services


@shared_task(acks_late=True, name="threads.materialize_head")
def materialize_head(thread_id: str, checkpoint_ns: str = "") -> dict:
    """Materialize a thread's head on this worker; returns :func:`services.head_digest`'s dict.

    Mode errors are returned as data (``{"error": ..., "hint": ...}``), not raised,
    so the caller sees the spec's text instead of a traceback.
    """
    return services.head_digest(get_runtime(), thread_id, checkpoint_ns)
