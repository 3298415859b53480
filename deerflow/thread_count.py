"""How many threads a thread-list filter matches (the list's result count).

``count_threads(saver, **filters) == len(every page of list_threads(saver, **filters))``
for the same filters, read at one moment: the count runs over the same
thread summary (``dfa_thread_summary``) with the same conditions, or, when
the summary cannot be used, over the same live aggregate of LangGraph's tables.
"""

from __future__ import annotations

from typing import Any

from deerflow import inventory
from deerflow import summary as summary_table
from deerflow.sqlread import reader_for
from deerflow.storage.deerflow_tables import DEFAULT_ORPHAN_MIN_IDLE_S

__all__ = ["count_threads"]


def count_threads(saver: Any, *, mode: str | None = None, thread_class: str | None = None,
                  q: str | None = None, owner: str | None = None,
                  orphan_min_idle_s: float = DEFAULT_ORPHAN_MIN_IDLE_S) -> int:
    """The number of threads :func:`deerflow.inventory.list_threads` lists for these filters.

    Args:
        saver: SQLite or Postgres saver.
        mode: ``"full"`` or ``"delta"``, or ``None`` for any.
        thread_class: one of :data:`deerflow.inventory.LIST_CLASSES` (``orphaned`` included), or ``None``.
        q: substring of the thread id or its DeerFlow title, ignoring case, or ``None``.
        owner: DeerFlow's ``threads_meta.user_id``, exactly, or ``None``.
        orphan_min_idle_s: the orphan class's minimum idle age (seconds).

    Returns:
        A count (>= 0). One ``COUNT(*)`` on the summary (indexed), else one aggregate.

    Raises:
        TypeError: the saver has no SQL tables (``InMemorySaver``).
    """
    if not summary_table.readable(saver, refresh=False):
        rows = inventory._live_rows(saver, q, owner=owner, thread_class=thread_class,
                                    orphan_min_idle_s=orphan_min_idle_s)
        stored_class = None if thread_class == inventory.ORPHANED else thread_class
        return sum(1 for r in map(inventory._to_summary, rows)
                   if (not mode or r.mode == mode) and (not stored_class or r.thread_class == stored_class))
    reader = reader_for(saver)
    where, params = inventory.summary_conditions(reader, mode=mode, thread_class=thread_class, q=q, owner=owner,
                                                 orphan_min_idle_s=orphan_min_idle_s)
    condition = f"WHERE {' AND '.join(where)}" if where else ""
    rows = reader.query(f"SELECT COUNT(*) AS n FROM dfa_thread_summary {condition}", params)
    return int(rows[0]["n"])
