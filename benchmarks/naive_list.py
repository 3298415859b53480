"""The pre-summary thread list (the benchmark's baseline and the tests' oracle).

Aggregates every checkpoint per request with a ``GROUP BY thread_id``; the
product reads :mod:`deerflow.inventory.summary` instead (:func:`deerflow.inventory.list_threads`).
"""

from __future__ import annotations

from typing import Any

from deerflow.inventory.cursors import decode_cursor, encode_cursor
from deerflow.inventory.listing import validate_list_args
from deerflow.inventory.thread_summary import ThreadSummary, summary_from_row
from deerflow.storage.sqlread import SqlReader, reader_for

__all__ = ["list_threads_naive", "naive_sql"]


def naive_sql(reader: SqlReader, where: str) -> str:
    """The per-request aggregate the summary replaces: ``GROUP BY thread_id`` over every checkpoint."""
    r = reader
    return f"""
        WITH agg AS (
            SELECT c.thread_id,
                   COUNT(*) AS checkpoint_count,
                   MAX(c.checkpoint_id) AS last_checkpoint_id,
                   MAX(CASE WHEN c.checkpoint_ns = '' THEN c.checkpoint_id END) AS head_checkpoint_id,
                   SUM({r.truthy(r.marker())}) AS marker_count,
                   SUM({r.truthy(r.counters())}) AS counters_count,
                   SUM(CASE WHEN c.checkpoint_ns = '' AND NOT {r.marker()} AND NOT {r.counters()}
                            AND COALESCE({r.step()}, -1) >= 0 THEN 1 ELSE 0 END) AS bare_count
            FROM checkpoints c
            {where}
            GROUP BY c.thread_id
        )
        SELECT agg.*, {r.truthy(r.marker('h'))} AS head_marker, {r.truthy(r.counters('h'))} AS head_counters
        FROM agg LEFT JOIN checkpoints h
          ON h.thread_id = agg.thread_id AND h.checkpoint_ns = '' AND h.checkpoint_id = agg.head_checkpoint_id
    """


def list_threads_naive(saver: Any, *, limit: int = 50, cursor: str | None = None, mode: str | None = None,
                       thread_class: str | None = None, q: str | None = None) -> tuple[list[ThreadSummary], str | None]:
    """The pre-summary implementation: aggregate every checkpoint per request (the benchmark's baseline).

    Same arguments, order and cursors as :func:`list_threads` with ``sort="updated"``;
    storage fields stay 0. Cost: a ``GROUP BY thread_id`` over all of ``checkpoints``.
    """
    validate_list_args(limit, mode, thread_class, "updated")
    reader = reader_for(saver)
    where, params = "", []
    if q:
        where = f"WHERE {reader.contains('c.thread_id')}"
        params.append(q)
    rows = [summary_from_row(r) for r in reader.query(naive_sql(reader, where), params)]
    rows = [r for r in rows if (not mode or r.mode == mode) and (not thread_class or r.thread_class == thread_class)]
    rows.sort(key=lambda r: (r.last_checkpoint_id or "", r.thread_id), reverse=True)
    if cursor:
        after = decode_cursor(cursor)
        rows = [r for r in rows if (r.last_checkpoint_id or "", r.thread_id) < after]
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit:
        next_cursor = encode_cursor(page[-1].last_checkpoint_id or "", page[-1].thread_id)
    return page, next_cursor
