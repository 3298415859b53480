"""Inventory-summary and storage services shared by the pages, the API, the command and the task.

The thread list reads ``dfa_thread_summary`` (:mod:`deerflow.summary`); these
functions report how current it is, refresh it (the "Refresh" button, ``POST
/api/threads/refresh``, ``manage.py refresh_inventory`` and the periodic
Celery task all call :func:`refresh_inventory`), heal one thread's row from
its live aggregate, and chart a thread's bytes per checkpoint.
"""

from __future__ import annotations

from typing import Any

from dashboard.runtime import DashboardRuntime
from dashboard.threads.charts import Chart, bytes_chart
from deerflow import footprint, inventory
from deerflow import summary as summary_table

__all__ = ["REFRESH_LAG_S", "freshness", "heal_summary", "refresh_inventory", "storage_chart", "storage_totals"]

#: Seconds behind the watermark every refresh rescans (rows committed late, clock skew between writers).
REFRESH_LAG_S = 120.0


def freshness(rt: DashboardRuntime) -> summary_table.Freshness | None:
    """How current the thread summary is, or ``None`` for a saver without SQL tables. Writes nothing."""
    try:
        if summary_table.access(rt.saver) == "none":
            return None
        return summary_table.freshness(rt.saver)
    except TypeError:  # no SQL tables (memory saver)
        return None


def refresh_inventory(rt: DashboardRuntime, *, full: bool = False) -> summary_table.RefreshReport:
    """Bring the thread summary up to date (``full``: rebuild every row and drop vanished threads).

    The incremental form recomputes the threads touched since the watermark,
    rescanning :data:`REFRESH_LAG_S` behind it. A role that may not write the
    summary gets ``kind="unavailable"`` (nothing done).
    """
    try:
        if summary_table.access(rt.saver) != "write":
            return summary_table.RefreshReport("unavailable", 0, None, 0.0)
    except TypeError:  # no SQL tables (memory saver)
        return summary_table.RefreshReport("unavailable", 0, None, 0.0)
    return summary_table.refresh(rt.saver, full=full, lag_s=REFRESH_LAG_S)


def heal_summary(rt: DashboardRuntime, live: inventory.ThreadSummary) -> bool:
    """Store ``live`` (a thread's exact, just-computed row) if the summary holds something else.

    Rewrites that keep checkpoint ids (conversion, revert) are invisible to
    the watermark; a thread page shows the live row and fixes the list's
    copy here. Returns True when the stored row was rewritten.
    """
    try:
        if summary_table.access(rt.saver) != "write":
            return False
        stored = inventory.stored_summary(rt.saver, live.thread_id)
    except TypeError:  # no SQL tables (memory saver)
        return False
    if stored == live:
        return False
    summary_table.refresh_threads(rt.saver, [live.thread_id])
    return True


def storage_chart(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str = "") -> Chart | None:
    """The bytes-per-checkpoint chart of one namespace, or ``None`` (no rows, or no SQL tables)."""
    try:
        return bytes_chart(footprint.checkpoint_bytes(rt.saver, thread_id, checkpoint_ns))
    except TypeError:
        return None


def storage_totals(rt: DashboardRuntime) -> dict[str, dict[str, Any]]:
    """Threads and bytes per mode (see :func:`deerflow.inventory.storage_by_mode`); ``{}`` without SQL tables."""
    try:
        return inventory.storage_by_mode(rt.saver)
    except TypeError:
        return {}
