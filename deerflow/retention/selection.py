"""Which threads a retention run covers: every thread, or the threads idle for at least D days."""

from __future__ import annotations

import datetime as dt

from deerflow.config.database_config import DatabaseConfig
from deerflow.storage.sessions import open_session
from deerflow.storage.sqlread import checkpoint_time

__all__ = ["select_threads"]


def select_threads(database: DatabaseConfig, *, idle_days: float | None = None,
                   now: dt.datetime | None = None) -> list[str]:
    """Thread ids of the checkpoint database, sorted; with ``idle_days`` only the idle ones.

    A thread is idle when its newest checkpoint (the largest id, any
    namespace; its time is the one LangGraph's UUIDv6 id embeds) is older than
    ``idle_days`` days before ``now``. A span reaching back past year 1
    (``1e15``, infinity) selects nothing.

    Args:
        database: the checkpoint database (sqlite or postgres).
        idle_days: minimum idle time (days, >= 0), or ``None`` for every thread.
        now: the reference time (UTC; default now).

    Raises:
        ValueError: ``idle_days`` < 0, or the memory backend.
    """
    if idle_days is not None and idle_days < 0:
        raise ValueError(f"idle_days must be >= 0, got {idle_days}")
    with open_session(database, write=False) as session:
        rows = session.query("SELECT thread_id, MAX(checkpoint_id) AS newest FROM checkpoints GROUP BY thread_id")
    if idle_days is None:
        return sorted(r["thread_id"] for r in rows)
    now = now or dt.datetime.now(dt.UTC)
    if idle_days >= (now - dt.datetime.min.replace(tzinfo=dt.UTC)).days:
        return []  # idle since before year 1 (or for ever): no checkpoint is that old, and the date would overflow
    cutoff = now - dt.timedelta(days=idle_days)
    out = []
    for r in rows:
        when = checkpoint_time(r["newest"])
        if when is not None and when < cutoff:
            out.append(r["thread_id"])
    return sorted(out)
