"""Inventory-summary and storage services shared by the pages, the API, the command and the task.

The thread list reads ``dfa_thread_summary`` (:mod:`deerflow.inventory.summary`); these
functions report how current it is, refresh it (the list page's "Refresh"
button, ``manage.py refresh_inventory`` and the periodic Celery task all call
:func:`refresh_inventory`), heal one thread's row from
its live aggregate, and chart a thread's bytes per checkpoint.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from dashboard.runtime import DashboardRuntime
from dashboard.threads.charts import Chart, bytes_chart
from deerflow import inventory
from deerflow.inventory import summary as summary_table
from deerflow.storage import has_sql_tables

__all__ = ["REFRESH_LAG_S", "VERIFY_EVERY_S", "SummaryCache", "freshness", "heal_summary", "refresh_inventory",
           "storage_chart", "storage_totals", "summary_cache"]

#: Seconds behind the watermark every refresh rescans (rows committed late, clock skew between writers).
REFRESH_LAG_S = 120.0
#: Seconds between two count checks of the periodic refresh (rows written below the watermark);
#: the check counts every checkpoint, so the 30 s beat does not run it each time.
VERIFY_EVERY_S = 300.0


class SummaryCache:
    """Recently shown thread rows, keyed by saver and thread, valid while the thread's head is unchanged.

    The thread page already holds the head it materialized (id and metadata);
    a row cached for that same head id, with the same DeerFlow marker and
    LangGraph counters on it, is the row the summary would answer -- without
    a query. A new head, or a rewrite of the head's metadata under the same id
    (conversion, revert), misses. Bounded (least recently used dropped).
    """

    def __init__(self, size: int = 2048):
        self.size = size
        self._rows: OrderedDict[tuple[int, str], inventory.ThreadSummary] = OrderedDict()
        self._cadences: OrderedDict[tuple[int, str], tuple[inventory.ThreadSummary, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, rt: DashboardRuntime, thread_id: str, head_id: str, marker: bool, counters: bool
            ) -> inventory.ThreadSummary | None:
        """The cached row if it was computed for exactly this head, else ``None``."""
        with self._lock:
            row = self._rows.get((id(rt.saver), thread_id))
            if row is None or ((row.head_checkpoint_id, row.head_marker, row.head_counters)
                               != (head_id, marker, counters)):
                return None
            self._rows.move_to_end((id(rt.saver), thread_id))
            return row

    def put(self, rt: DashboardRuntime, row: inventory.ThreadSummary) -> None:
        """Remember ``row`` (a current row of its thread)."""
        with self._lock:
            self._remember(self._rows, (id(rt.saver), row.thread_id), row)

    def cadence(self, rt: DashboardRuntime, row: inventory.ThreadSummary, compute: Callable[[], Any]) -> Any:
        """The snapshot cadence shown beside ``row`` (the thread page's summary line): ``compute()`` once per row.

        The cadence is inferred from the thread's checkpoints, as the row is
        summed from them; a row equal to the one a cadence was computed beside
        (same head, marker and counters, checkpoint count, bytes, update time:
        every field) answers that cadence without a query, so the line is
        never older than the row it sits in. Any other row computes it again.

        Args:
            rt: the runtime (its saver keys the entry).
            row: the thread's row as the page shows it (:func:`dashboard.threads.services.thread_summary`).
            compute: the live inference (:func:`dashboard.threads.services.thread_cadence`).

        Returns:
            What ``compute`` returned for an equal row.
        """
        key = (id(rt.saver), row.thread_id)
        with self._lock:
            hit = self._cadences.get(key)
            if hit is not None and hit[0] == row:
                self._cadences.move_to_end(key)
                return hit[1]
        value = compute()
        with self._lock:
            self._remember(self._cadences, key, (row, value))
        return value

    def _remember(self, entries: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        """Store ``value`` as the newest entry, dropping the oldest beyond :attr:`size` (call under the lock)."""
        entries[key] = value
        entries.move_to_end(key)
        while len(entries) > self.size:
            entries.popitem(last=False)


#: The process's cache of thread-page rows.
summary_cache = SummaryCache()


def freshness(rt: DashboardRuntime) -> summary_table.Freshness | None:
    """How current the thread summary is, or ``None`` for a saver without SQL tables. Writes nothing."""
    if not has_sql_tables(rt.saver) or summary_table.access(rt.saver) == "none":
        return None
    return summary_table.freshness(rt.saver)


def refresh_inventory(rt: DashboardRuntime, *, full: bool = False,
                      periodic: bool = False) -> summary_table.RefreshReport:
    """Bring the thread summary up to date (``full``: rebuild every row and drop vanished threads).

    The incremental form recomputes the threads touched since the watermark,
    rescanning :data:`REFRESH_LAG_S` behind it, then runs the count check
    (:func:`deerflow.inventory.summary.refresh`) for rows written below the watermark:

    * on demand (``periodic=False``: the list page's Refresh button, ``manage.py
      refresh_inventory``) every time, and missing rows turn the refresh into a
      full rebuild (``kind="full"``, ``missing`` says what was found);
    * periodically (the Celery beat) at most every :data:`VERIFY_EVERY_S`,
      only recording what is missing (the list footer shows it; the hourly
      reconcile or a Refresh fixes it): a full rebuild at 100k threads takes
      tens of seconds, too long for every beat.

    Args:
        rt: the dashboard runtime (its saver).
        full: rebuild every row.
        periodic: the beat's call (see above).

    Returns:
        The :class:`deerflow.inventory.summary.RefreshReport`; ``kind="unavailable"`` (nothing done)
        for a role that may not write the summary or a saver without SQL tables.
    """
    if not has_sql_tables(rt.saver) or summary_table.access(rt.saver) != "write":
        return summary_table.RefreshReport("unavailable", 0, None, 0.0)
    return summary_table.refresh(rt.saver, full=full, lag_s=REFRESH_LAG_S,
                                 verify_s=VERIFY_EVERY_S if periodic else 0.0, rebuild_missing=not periodic)


def heal_summary(rt: DashboardRuntime, live: inventory.ThreadSummary) -> bool:
    """Store ``live`` (a thread's exact, just-computed row) if the summary holds something else.

    Rewrites that keep checkpoint ids (conversion, revert) are invisible to
    the watermark; a thread page shows the live row and fixes the list's
    copy here. Returns True when the stored row was rewritten.
    """
    if not has_sql_tables(rt.saver) or summary_table.access(rt.saver) != "write":
        return False
    stored = inventory.stored_summary(rt.saver, live.thread_id)
    if stored == live:
        return False
    summary_table.refresh_threads(rt.saver, [live.thread_id])
    return True


def forget_vanished(rt: DashboardRuntime, thread_id: str) -> bool:
    """Drop the summary's row of a thread that has no checkpoints any more (deleted outside the dashboard).

    The watermark only sees new checkpoints, so a deleted thread stays listed
    until the next full refresh; the thread's own 404 removes it here.
    Call only once the thread is known to have no checkpoints. Returns True
    when a stored row was removed.
    """
    if (not has_sql_tables(rt.saver) or summary_table.access(rt.saver) != "write"
            or inventory.stored_summary(rt.saver, thread_id) is None):
        return False
    summary_table.refresh_threads(rt.saver, [thread_id])
    return True


def storage_chart(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str = "") -> Chart | None:
    """The bytes-per-checkpoint chart of one namespace, or ``None`` (no rows, or no SQL tables)."""
    if not has_sql_tables(rt.saver):
        return None
    return bytes_chart(inventory.checkpoint_bytes(rt.saver, thread_id, checkpoint_ns))


def storage_totals(rt: DashboardRuntime) -> dict[str, dict[str, Any]]:
    """Threads and bytes per mode (see :func:`deerflow.inventory.storage_by_mode`); ``{}`` without SQL tables."""
    if not has_sql_tables(rt.saver):
        return {}
    return inventory.storage_by_mode(rt.saver)
