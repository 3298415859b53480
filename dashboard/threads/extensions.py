"""What other apps show on a thread's pages, provided by them at start-up (the threads app imports none of them).

The jobs app (:class:`dashboard.jobs.apps.JobsConfig`) provides the jobs that
touched a thread and a prune job's marks on its history; without a provider
the thread pages show neither. Both readers read the dashboard's own
database, never the checkpoint database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ThreadExtensions", "current", "provide"]


def _no_jobs(thread_id: str) -> list[Any]:
    return []


def _no_marks(job_id: int, thread_id: str) -> dict[str, Any] | None:
    return None


@dataclass(frozen=True)
class ThreadExtensions:
    """The providers a thread page asks.

    Attributes:
        thread_jobs: ``thread_id -> [job result rows]``, newest first (the page's "Jobs" list).
        checkpoint_marks: ``(job_id, thread_id) -> {"job", "result", "marks"}`` or ``None``: a prune job's
            marks on the history tree.
    """

    thread_jobs: Callable[[str], list[Any]] = _no_jobs
    checkpoint_marks: Callable[[int, str], dict[str, Any] | None] = _no_marks


_current = ThreadExtensions()


def provide(given: ThreadExtensions) -> None:
    """Install the providers (called once from an app's ``ready()``; a later call replaces them)."""
    global _current
    _current = given


def current() -> ThreadExtensions:
    """The installed providers (the empty ones before any app provided them)."""
    return _current
