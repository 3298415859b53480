"""The hook job launches send Celery's ``jobs.dispatch`` task through.

:mod:`dashboard.jobs.tasks` imports :mod:`dashboard.jobs.services`, so the services cannot import the
task; the app installs the sender at start-up (:meth:`dashboard.jobs.apps.JobsConfig.ready`). This
module imports nothing, so installing it does not load the job code (and LangGraph behind it) into
every process that merely starts Django.
"""

from __future__ import annotations

from collections.abc import Callable

_sender: Callable[[int], None] | None = None


def set_dispatcher(send: Callable[[int], None]) -> None:
    """Install ``send(job_id)``, which sends ``jobs.dispatch`` for a job (called once at start-up)."""
    global _sender
    _sender = send


def send(job_id: int) -> None:
    """Send the dispatch task for ``job_id`` through the installed sender.

    Raises:
        RuntimeError: no sender is installed (``dashboard.jobs`` is not in ``INSTALLED_APPS``, or
            ``django.setup()`` has not run).
        kombu.exceptions.OperationalError, redis.exceptions.ConnectionError: the broker cannot be reached
            (the caller pauses the job).
    """
    if _sender is None:
        raise RuntimeError("no job dispatcher installed: dashboard.jobs is not in INSTALLED_APPS, or the app "
                           "registry is not ready (django.setup())")
    _sender(job_id)
