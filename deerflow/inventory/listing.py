"""Metadata-only inventory of a checkpoint database: threads, classes, storage, lineage evidence.

Nothing here materializes state: every fact comes from the ``checkpoints``
table's ids and metadata (the DeerFlow marker and LangGraph's
``counters_since_delta_snapshot``, spec "Marker contract") and the stored
sizes of its rows. Works on LangGraph's SQLite saver (metadata is JSON text
in a BLOB) and Postgres saver (metadata is JSONB) through the saver's own
connection. Lists, sorts and the census read the thread summary
(:mod:`deerflow.inventory.summary`), so a page costs an index range scan, not a scan
of every checkpoint; a role that cannot use the summary gets the same answers
aggregated live (``benchmarks/naive_list.py`` keeps the pre-summary baseline).

The row type and the classes live in :mod:`deerflow.inventory.thread_summary`, the
cursor codec in :mod:`deerflow.inventory.cursors`; callers import all of them from
:mod:`deerflow.inventory`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deerflow.inventory import deerflow_tables
from deerflow.inventory import summary as summary_table
from deerflow.inventory.cursors import SORTS, keyset_cursor, keyset_position
from deerflow.inventory.thread_summary import THREAD_CLASSES, ThreadSummary, summary_from_row
from deerflow.storage.sqlread import reader_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "LIST_CLASSES",
    "ORPHANED",
    "class_counts",
    "current_summary",
    "get_thread_summary",
    "list_threads",
    "mode_totals",
    "storage_by_class",
    "storage_by_mode",
    "stored_bytes",
    "stored_summary",
    "summary_conditions",
    "validate_list_args",
]


#: The census class of checkpoint threads without DeerFlow's ``threads_meta`` row, idle for a minimum age
#: (:mod:`deerflow.inventory.deerflow_tables`); a list filter beside the stored classes, not one of them.
ORPHANED = "orphaned"
#: The values of the list's class filter: every :data:`THREAD_CLASSES` value, then :data:`ORPHANED`.
LIST_CLASSES = (*THREAD_CLASSES, ORPHANED)


def validate_list_args(limit: int, mode: str | None, thread_class: str | None, sort: str,
                       owner: str | None = None) -> None:
    """Refuse list arguments out of range.

    Raises:
        ValueError: ``limit`` outside 1..1000, an unknown ``mode``/``thread_class``/``sort``, or a bad
            ``owner`` (:func:`deerflow.inventory.deerflow_tables.validate_owner`).
    """
    if not 1 <= limit <= 1000:
        raise ValueError(f"limit must be between 1 and 1000; got {limit}")
    if mode not in (None, "full", "delta"):
        raise ValueError(f"mode must be 'full' or 'delta'; got {mode!r}")
    if thread_class not in (None, *LIST_CLASSES):
        raise ValueError(f"class must be one of {', '.join(LIST_CLASSES)}; got {thread_class!r}")
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}; got {sort!r}")
    if owner is not None:
        deerflow_tables.validate_owner(owner)


def summary_conditions(reader: Any, *, mode: str | None, thread_class: str | None,
                       q: str | None, owner: str | None = None,
                       orphan_min_idle_s: float = deerflow_tables.DEFAULT_ORPHAN_MIN_IDLE_S,
                       tables: deerflow_tables.Presence | None = None) -> tuple[list[str], list[Any]]:
    """``(conditions, params)`` selecting the list's filters on ``dfa_thread_summary`` (``?`` placeholders).

    Args:
        reader: the saver's :class:`deerflow.storage.sqlread.SqlReader` (for its substring fragment).
        mode, thread_class: exact values, or ``None`` for any; ``thread_class`` :data:`ORPHANED` selects
            orphans (no ``threads_meta`` row, newest checkpoint older than ``orphan_min_idle_s`` seconds).
        q: a literal substring ignoring case (not a LIKE pattern: ``%`` and ``_`` match themselves) of the
            thread id, or of its DeerFlow title when the database has ``threads_meta``; or ``None``.
        owner: DeerFlow's ``threads_meta.user_id``, exactly, or ``None``.
        tables: DeerFlow's tables in the database (:func:`deerflow.inventory.deerflow_tables.presence`;
            default: looked up now, only when ``q``, ``owner`` or the orphan class needs them).

    Returns:
        The conditions to ``AND`` together (empty: every thread) and their parameters, in order.
    """
    where, params = [], []
    orphaned = thread_class == ORPHANED
    for column, value in (("mode", mode), ("thread_class", None if orphaned else thread_class)):
        if value:
            where.append(f"{column} = ?")
            params.append(value)
    if q or owner is not None or orphaned:
        tables = deerflow_tables.presence(reader) if tables is None else tables
        more, more_params = deerflow_tables.list_conditions(
            reader, tables, owner=owner, q=q, orphaned=orphaned,
            orphaned_before=deerflow_tables.orphan_floor(orphan_min_idle_s) if orphaned else None)
        where += more
        params += more_params
    return where, params


def list_threads(
    saver: Any,
    *,
    limit: int = 50,
    cursor: str | None = None,
    mode: str | None = None,
    thread_class: str | None = None,
    q: str | None = None,
    sort: str = "updated",
    refresh: bool = True,
    owner: str | None = None,
    orphan_min_idle_s: float = deerflow_tables.DEFAULT_ORPHAN_MIN_IDLE_S,
) -> tuple[list[ThreadSummary], str | None]:
    """One page of threads from the summary table, largest sort key first, with a keyset cursor.

    Reads ``dfa_thread_summary`` (:mod:`deerflow.inventory.summary`) through an index
    per sort and filter: the cost is the page, not the database. With
    ``refresh`` the summary is first brought up to date if that is cheap
    (:func:`deerflow.inventory.summary.ensure_fresh`; staleness bound documented there).

    Paging is a keyset over ``(sort key, thread_id)``: a walk returns every
    thread whose key does not change meanwhile exactly once, and never a
    thread twice (keys only grow -- a thread updated during the walk moves
    behind the cursor); threads created meanwhile appear on a new walk.

    Args:
        saver: SQLite or Postgres saver.
        limit: page size (count, 1..1000).
        cursor: from a previous page's ``next_cursor`` with the same ``sort``.
        mode: ``"full"`` or ``"delta"`` to filter by :attr:`ThreadSummary.mode`.
        thread_class: one of :data:`LIST_CLASSES` to filter by class (:data:`ORPHANED`: checkpoint threads
            without DeerFlow's ``threads_meta`` row, idle for ``orphan_min_idle_s`` seconds; none when the
            database has no such table).
        q: substring of the thread id, or of its DeerFlow title, ignoring case (``%`` and ``_`` are literal).
        sort: ``"updated"`` (newest update first), ``"checkpoints"`` (most first) or
            ``"bytes"`` (heaviest first); see :data:`SORTS`.
        refresh: refresh the summary first when cheap.
        owner: only threads DeerFlow's ``threads_meta`` gives this owner (``user_id``, exactly; none when
            the database has no such table).
        orphan_min_idle_s: the orphan class's minimum idle age (seconds).

    Returns:
        ``(threads, next_cursor)``; ``next_cursor`` is ``None`` on the last page. Each row carries DeerFlow's
        ``title``, ``owner`` and ``deerflow_thread`` (:func:`deerflow.inventory.deerflow_tables.annotate`).

    Raises:
        InvalidCursorError: a malformed cursor, or one made for another sort (:func:`keyset_position`).
        ValueError: ``limit`` out of range, an unknown ``mode``/``thread_class``/``sort``, or a bad ``owner``.
    """
    validate_list_args(limit, mode, thread_class, sort, owner)
    reader = reader_for(saver)
    tables = deerflow_tables.presence(reader)
    if not summary_table.readable(saver, refresh=refresh):
        page, next_cursor = _page(
            _live_rows(saver, q, owner=owner, thread_class=thread_class, orphan_min_idle_s=orphan_min_idle_s,
                       tables=tables),
            limit=limit, cursor=cursor, mode=mode, thread_class=thread_class, sort=sort)
        return deerflow_tables.annotate(reader, page, tables=tables), next_cursor
    key = SORTS[sort]
    where, params = summary_conditions(reader, mode=mode, thread_class=thread_class, q=q, owner=owner,
                                       orphan_min_idle_s=orphan_min_idle_s, tables=tables)
    if cursor:
        where.append(f"({key}, thread_id) < (?, ?)")
        params.extend(keyset_position(sort, cursor))
    rows = reader.query(
        f"SELECT * FROM dfa_thread_summary {'WHERE ' + ' AND '.join(where) if where else ''} "
        f"ORDER BY {key} DESC, thread_id DESC LIMIT {int(limit) + 1}", params)
    page = [summary_from_row(r) for r in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        next_cursor = keyset_cursor(sort, rows[limit - 1][key], rows[limit - 1]["thread_id"])
    return deerflow_tables.annotate(reader, page, tables=tables), next_cursor


def _live_rows(saver: BaseCheckpointSaver[Any], q: str | None = None, *, owner: str | None = None,
               thread_class: str | None = None,
               orphan_min_idle_s: float = deerflow_tables.DEFAULT_ORPHAN_MIN_IDLE_S,
               tables: deerflow_tables.Presence | None = None) -> list[dict[str, Any]]:
    """Every thread's row aggregated from LangGraph's tables now (when the summary cannot be used).

    The DeerFlow filters (``q`` on titles, ``owner``, the orphan class) become a set of thread ids read from
    ``threads_meta`` (:func:`deerflow.inventory.deerflow_tables.live_filter`); rows of the orphan class keep
    their stored ``thread_class``.
    """
    reader = reader_for(saver)
    where, params = "thread_id IS NOT NULL", []
    if q:
        where, params = reader.contains("thread_id"), [q]
    deerflow_filtered = owner is not None or thread_class == ORPHANED or bool(q)
    if deerflow_filtered:
        tables = deerflow_tables.presence(reader) if tables is None else tables
    if deerflow_filtered and tables is not None and tables.has_threads_meta:
        where, params = "thread_id IS NOT NULL", []
        keep = deerflow_tables.live_filter(
            reader, tables, q=q, owner=owner,
            orphaned_before=deerflow_tables.orphan_floor(orphan_min_idle_s) if thread_class == ORPHANED else None,
            orphaned=thread_class == ORPHANED)
        rows = reader.query(summary_table.row_select_sql(reader, where), summary_table.row_params(reader, params))
        return [r for r in rows if keep(r)]
    if owner is not None or thread_class == ORPHANED:
        return []  # without threads_meta no thread has an owner, and none can be called an orphan
    return reader.query(summary_table.row_select_sql(reader, where), summary_table.row_params(reader, params))


def _page(rows: list[dict[str, Any]], *, limit: int, cursor: str | None, mode: str | None,
          thread_class: str | None, sort: str) -> tuple[list[ThreadSummary], str | None]:
    """Filter, order and cut one keyset page in memory (the same order and cursors as the SQL path)."""
    key = SORTS[sort]
    stored_class = None if thread_class == ORPHANED else thread_class
    rows = [r for r in rows
            if (not mode or r["mode"] == mode) and (not stored_class or r["thread_class"] == stored_class)]
    empty = "" if sort == "updated" else 0
    rows.sort(key=lambda r: (r[key] if r[key] is not None else empty, r["thread_id"]), reverse=True)
    if cursor:
        after = keyset_position(sort, cursor)
        rows = [r for r in rows if (r[key], r["thread_id"]) < after]
    next_cursor = None
    if len(rows) > limit:
        next_cursor = keyset_cursor(sort, rows[limit - 1][key], rows[limit - 1]["thread_id"])
    return [summary_from_row(r) for r in rows[:limit]], next_cursor



def get_thread_summary(saver: BaseCheckpointSaver[Any], thread_id: str) -> ThreadSummary | None:
    """The inventory row of one thread computed now from its own rows (exact), or ``None`` when it has none.

    Reads LangGraph's tables only (through the ``thread_id`` indexes); writes nothing.
    """
    reader = reader_for(saver)
    rows = reader.query(summary_table.row_select_sql(reader, "thread_id = ?"),
                        summary_table.row_params(reader, [thread_id]))
    return summary_from_row(rows[0]) if rows else None


def stored_summary(saver: BaseCheckpointSaver[Any], thread_id: str) -> ThreadSummary | None:
    """The thread's row as the summary table holds it now (possibly stale), or ``None`` (no row, or
    the summary cannot be read by this role)."""
    if summary_table.access(saver) == "none":
        return None
    rows = reader_for(saver).query("SELECT * FROM dfa_thread_summary WHERE thread_id = ?", [thread_id])
    return summary_from_row(rows[0]) if rows else None


def stored_bytes(saver: BaseCheckpointSaver[Any], thread_ids: list[str]) -> dict[str, int]:
    """Stored bytes of each thread (checkpoints, blobs and pending writes) as the summary table last counted them.

    A hint for sizing work (a job's batches), never a measurement: the row may be stale, and a thread the
    summary has not seen yet (or a role that cannot read the summary) is simply absent from the answer.

    Args:
        thread_ids: the threads asked about (any number; duplicates allowed).

    Returns:
        ``{thread_id: bytes}`` for the threads the summary holds.
    """
    if not thread_ids or summary_table.access(saver) == "none":
        return {}
    r = reader_for(saver)
    sizes: dict[str, int] = {}
    unique = sorted(set(thread_ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start:start + 500]
        rows = r.query("SELECT thread_id, bytes_total AS n FROM dfa_thread_summary "
                       f"WHERE thread_id IN ({', '.join('?' * len(chunk))})", chunk)
        sizes.update({row["thread_id"]: int(row["n"] or 0) for row in rows})
    return sizes


def current_summary(saver: BaseCheckpointSaver[Any], thread_id: str) -> ThreadSummary | None:
    """The stored row when it still describes the thread's head, else ``None`` (compute it live then).

    One query: the newest root-namespace checkpoint (the primary key's order)
    against the stored row. Current means the same head id and the same head
    marker and counters -- a conversion or a revert rewrites the head's
    metadata under the same id. Rows added only in subgraph namespaces or
    pending writes since the last refresh are not noticed here (the list's
    staleness bound applies).
    """
    if summary_table.access(saver) == "none":
        return None
    r = reader_for(saver)
    rows = r.query(
        f"SELECT s.*, h.checkpoint_id AS live_head, {r.truthy(r.marker('h'))} AS live_marker, "
        f"{r.truthy(r.counters('h'))} AS live_counters FROM (SELECT c.thread_id, c.checkpoint_id, c.metadata "
        "FROM checkpoints c WHERE c.thread_id = ? AND c.checkpoint_ns = '' ORDER BY c.checkpoint_id DESC LIMIT 1) h "
        "JOIN dfa_thread_summary s ON s.thread_id = h.thread_id", [thread_id])
    if not rows:
        return None
    row = rows[0]
    same = (row["live_head"] == row["head_checkpoint_id"] and bool(row["live_marker"]) == bool(row["head_marker"])
            and bool(row["live_counters"]) == bool(row["head_counters"]))
    return summary_from_row(row) if same else None


def class_counts(saver: BaseCheckpointSaver[Any], *, refresh: bool = True) -> dict[str, int]:
    """Threads per class (every one of :data:`THREAD_CLASSES`, zeros included): one ``GROUP BY`` on the summary.

    Falls back to aggregating LangGraph's tables when the summary cannot be used.
    """
    if summary_table.readable(saver, refresh=refresh):
        rows = reader_for(saver).query(
            "SELECT thread_class, COUNT(*) AS n FROM dfa_thread_summary GROUP BY thread_class")
        counts = {r["thread_class"]: int(r["n"]) for r in rows}
    else:
        counts = {}
        for r in _live_rows(saver):
            counts[r["thread_class"]] = counts.get(r["thread_class"], 0) + 1
    return {c: counts.get(c, 0) for c in THREAD_CLASSES}


_STORAGE_KEYS = ("threads", "bytes_checkpoints", "bytes_blobs", "bytes_writes", "bytes_total")


def storage_by_mode(saver: BaseCheckpointSaver[Any], *, refresh: bool = True) -> dict[str, dict[str, int]]:
    """Totals per mode: ``{"full"|"delta": {"threads", "bytes_checkpoints", "bytes_blobs", "bytes_writes",
    "bytes_total"}}`` (counts and bytes; both modes always present). Summary first, live fallback."""
    return _storage_by(saver, "mode", ("full", "delta"), refresh)


def storage_by_class(saver: BaseCheckpointSaver[Any], *, refresh: bool = True) -> dict[str, dict[str, int]]:
    """Totals per class, as :func:`storage_by_mode` (every one of :data:`THREAD_CLASSES` present):
    one ``GROUP BY`` on the summary (the audit's "compact legacy threads": classes ``full`` and ``migrated``)."""
    return _storage_by(saver, "thread_class", THREAD_CLASSES, refresh)


def mode_totals(by_class: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """:func:`storage_by_mode`'s answer from :func:`storage_by_class`'s, without another ``GROUP BY``.

    A thread's mode is ``full`` exactly when its class is ``full`` (no marker and no counters on any
    checkpoint, :func:`classify`); every other class is stored in delta mode.

    Args:
        by_class: :func:`storage_by_class`'s totals (counts and bytes per class).

    Returns:
        ``{"full"|"delta": {"threads", "bytes_checkpoints", "bytes_blobs", "bytes_writes", "bytes_total"}}``.
    """
    delta = dict.fromkeys(_STORAGE_KEYS, 0)
    for cls, totals in by_class.items():
        if cls != "full":
            for k in _STORAGE_KEYS:
                delta[k] += int(totals.get(k, 0))
    return {"full": {k: int(by_class.get("full", {}).get(k, 0)) for k in _STORAGE_KEYS}, "delta": delta}


def _storage_by(saver: BaseCheckpointSaver[Any], column: str, groups: tuple[str, ...],
                refresh: bool) -> dict[str, dict[str, int]]:
    out = {g: dict.fromkeys(_STORAGE_KEYS, 0) for g in groups}
    if summary_table.readable(saver, refresh=refresh):
        for r in reader_for(saver).query(
                f"SELECT {column} AS grp, COUNT(*) AS threads, SUM(bytes_checkpoints) AS bytes_checkpoints, "
                "SUM(bytes_blobs) AS bytes_blobs, SUM(bytes_writes) AS bytes_writes, SUM(bytes_total) AS bytes_total "
                f"FROM dfa_thread_summary GROUP BY {column}"):
            out[r["grp"]] = {k: int(r[k] or 0) for k in _STORAGE_KEYS}
        return out
    for row in _live_rows(saver):
        s = summary_from_row(row)
        totals = out[getattr(s, column)]
        totals["threads"] += 1
        for k in _STORAGE_KEYS[1:]:
            totals[k] += int(getattr(s, k) or 0)
    return out
