"""Orphans (checkpoint threads without a ``threads_meta`` row, idle long enough) and the reverse."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields
from typing import Any

from deerflow.inventory import summary as summary_table
from deerflow.inventory.deerflow_tables.schema import META_COLUMNS, Presence, presence, select_columns
from deerflow.inventory.deerflow_tables.threads import CHUNK, ThreadMeta, list_conditions, meta_of
from deerflow.inventory.summary.writes import id_floor
from deerflow.storage.dialect import Dialect


def orphan_floor(min_idle_s: float, now: dt.datetime | None = None) -> str | None:
    """The checkpoint id below which a thread's newest checkpoint makes it idle for ``min_idle_s`` seconds.

    LangGraph's checkpoint ids are UUIDv6, which sort by creation time, so "newest checkpoint older than the
    cutoff" is "largest id below this floor".

    Returns:
        The smallest UUIDv6 string of ``now - min_idle_s``, or ``None`` when that instant is before year 1
        (nothing is that old: no orphan).

    Raises:
        ValueError: ``min_idle_s`` is negative or not a number.
    """
    if min_idle_s != min_idle_s or min_idle_s < 0:
        raise ValueError(f"min_idle_s must be a number of seconds >= 0; got {min_idle_s!r}")
    now = now or dt.datetime.now(dt.UTC)
    try:
        cutoff = now - dt.timedelta(seconds=min_idle_s)
    except OverflowError:
        return None
    if cutoff.year < 1583:  # before UUIDv6's epoch (1582-10-15): no checkpoint id is older
        return None
    return id_floor(cutoff)


@dataclass(frozen=True)
class OrphanTotals:
    """What orphans hold (from the thread summary, or aggregated live).

    Attributes:
        threads: orphaned threads (count).
        checkpoints: their checkpoints (count).
        bytes_checkpoints, bytes_blobs, bytes_writes, bytes_total: their stored bytes.
    """

    threads: int = 0
    checkpoints: int = 0
    bytes_checkpoints: int = 0
    bytes_blobs: int = 0
    bytes_writes: int = 0
    bytes_total: int = 0


#: The fields of :class:`OrphanTotals`, in order (the bytes from the third on).
_TOTALS = tuple(f.name for f in fields(OrphanTotals))


def orphan_totals(db: Any, floor: str | None, *, tables: Presence | None = None,
                  summary: bool = True) -> OrphanTotals | None:
    """Count the orphans idle past ``floor`` (:func:`orphan_floor`) and the bytes they hold.

    Args:
        db: a reader on the checkpoint database.
        floor: the idle floor (``None``: nothing is idle that long: zeros).
        summary: read ``dfa_thread_summary`` (one aggregate with an anti-join); ``False`` aggregates
            LangGraph's tables now (a role that cannot read the summary).

    Returns:
        The totals, or ``None`` without ``threads_meta`` (orphans cannot be told).
    """
    tables = presence(db) if tables is None else tables
    if not tables.has_threads_meta:
        return None
    if floor is None:
        return OrphanTotals()
    if summary:
        where, params = list_conditions(db, tables, orphaned=True, orphaned_before=floor)
        row = db.query("SELECT COUNT(*) AS threads, SUM(checkpoint_count) AS checkpoints, "
                       "SUM(bytes_checkpoints) AS bytes_checkpoints, SUM(bytes_blobs) AS bytes_blobs, "
                       "SUM(bytes_writes) AS bytes_writes, SUM(bytes_total) AS bytes_total "
                       f"FROM dfa_thread_summary WHERE {' AND '.join(where)}", params)[0]
        return OrphanTotals(**{k: int(row[k] or 0) for k in _TOTALS})
    ids = orphaned_thread_ids(db, floor, tables=tables)
    if not ids:
        return OrphanTotals()
    totals = dict.fromkeys(_TOTALS, 0)
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i:i + CHUNK]
        marks = ", ".join("?" for _ in chunk)
        for row in db.query(summary_table.row_select_sql(db, f"thread_id IN ({marks})"),
                            summary_table.row_params(db, chunk)):
            totals["threads"] += 1
            totals["checkpoints"] += int(row["checkpoint_count"] or 0)
            for key in _TOTALS[2:]:
                totals[key] += int(row[key] or 0)
    return OrphanTotals(**totals)


def orphaned_thread_ids(db: Any, floor: str | None, *, tables: Presence | None = None) -> list[str]:
    """The orphans idle past ``floor``, from LangGraph's ``checkpoints`` itself (not the summary), sorted.

    One aggregate over ``checkpoints`` (its primary key starts with ``thread_id``) with an anti-join on
    ``threads_meta``: what a deletion selects, so it never trusts a stale summary row.

    Returns:
        Thread ids; ``[]`` without ``threads_meta`` (orphans cannot be told) or when ``floor`` is ``None``.
    """
    tables = presence(db) if tables is None else tables
    if not tables.has_threads_meta or floor is None:
        return []
    rows = db.query("SELECT c.thread_id AS thread_id FROM checkpoints c "
                    "WHERE NOT EXISTS (SELECT 1 FROM threads_meta m WHERE m.thread_id = c.thread_id) "
                    "GROUP BY c.thread_id HAVING MAX(c.checkpoint_id) < ? ORDER BY c.thread_id", [floor])
    return [str(r["thread_id"]) for r in rows]


def still_orphaned(db: Any, thread_id: str, floor: str | None, *, tables: Presence | None = None) -> bool:
    """Whether ``thread_id`` is, now, an orphan idle past ``floor``: the one-thread twin of
    :func:`orphaned_thread_ids`, asked again just before an orphan is deleted (since it was selected, DeerFlow
    may have written its ``threads_meta`` row, or a process a new checkpoint).

    Returns:
        ``False`` without ``threads_meta``, when ``floor`` is ``None``, when the thread has a ``threads_meta``
        row or no checkpoint, or when its newest checkpoint is not older than ``floor``.
    """
    tables = presence(db) if tables is None else tables
    if not tables.has_threads_meta or floor is None:
        return False
    rows = db.query("SELECT MAX(c.checkpoint_id) AS newest FROM checkpoints c WHERE c.thread_id = ? "
                    "AND NOT EXISTS (SELECT 1 FROM threads_meta m WHERE m.thread_id = c.thread_id)", [thread_id])
    newest = rows[0]["newest"] if rows else None
    return newest is not None and str(newest) < floor


def metadata_without_checkpoints(db: Any, *, limit: int = 50, tables: Presence | None = None,
                                 summary: bool = False) -> tuple[int, list[ThreadMeta]]:
    """``threads_meta`` rows with no checkpoint at all: DeerFlow threads whose history is gone (never touched).

    Args:
        limit: rows returned (count), most recently updated first.
        summary: anti-join the thread summary (a hash of its rows: 0.3 s at 100k threads) instead of
            ``checkpoints`` (its every row: 4 s at 2.7M checkpoints). The listed rows are checked against
            ``checkpoints`` itself (a thread newer than the summary's last refresh is not listed); the count is
            as of that refresh.

    Returns:
        ``(count of such rows, up to limit of them)``; ``(0, [])`` without ``threads_meta``.
    """
    tables = presence(db) if tables is None else tables
    if not tables.has_threads_meta:
        return 0, []
    against = "dfa_thread_summary c" if summary else "checkpoints c"
    missing = f"NOT EXISTS (SELECT 1 FROM {against} WHERE c.thread_id = m.thread_id)"
    count = int(db.query(f"SELECT COUNT(*) AS n FROM threads_meta m WHERE {missing}")[0]["n"])
    if not count:
        return 0, []
    order = "m.updated_at DESC, " if "updated_at" in tables.threads_meta else ""
    rows = [meta_of(r) for r in db.query(
        f"SELECT {select_columns(tables.threads_meta, META_COLUMNS, 'm')} FROM threads_meta m "
        f"WHERE {missing} ORDER BY {order}m.thread_id LIMIT {int(limit)}")]
    if summary and rows:
        condition, params = Dialect(db.dialect).in_list("thread_id", [m.thread_id for m in rows])
        stored = {str(r["thread_id"]) for r in db.query(
            f"SELECT DISTINCT thread_id FROM checkpoints WHERE {condition}", params)}
        rows = [m for m in rows if m.thread_id not in stored]
        count -= len(stored)
    return count, rows
