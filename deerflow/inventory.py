"""Metadata-only inventory of a checkpoint database: threads, classes, storage, lineage evidence.

Nothing here materializes state: every fact comes from the ``checkpoints``
table's ids and metadata (the DeerFlow marker and LangGraph's
``counters_since_delta_snapshot``, spec "Marker contract") and the stored
sizes of its rows. Works on LangGraph's SQLite saver (metadata is JSON text
in a BLOB) and Postgres saver (metadata is JSONB) through the saver's own
connection. Lists, sorts and the census read the thread summary
(:mod:`deerflow.summary`), so a page costs an index range scan, not a scan
of every checkpoint; a role that cannot use the summary gets the same answers
aggregated live (:func:`list_threads_naive` is the pre-summary baseline).

Thread classes (used by the list, the census and the API):

``full``
    no checkpoint carries delta evidence.
``delta``
    DeerFlow-marked delta thread, marked head, no legacy full ancestors.
``delta_counters_only``
    delta by LangGraph counters only (no DeerFlow marker anywhere), counters at the head.
``migrated``
    delta head over legacy full (unmarked, step >= 0) ancestors.
``inconsistent``
    a head that looks full over delta ancestors: either a full-mode write
    onto a delta thread, or a marker-less delta thread whose head is a
    snapshot checkpoint (LangGraph drops the counters there), which the
    spec's head-only gate misreads as full.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from dataclasses import asdict, dataclass
from typing import Any

from deerflow import summary as summary_table
from deerflow.errors import DeerFlowError
from deerflow.sqlread import SqlReader, checkpoint_time, reader_for

__all__ = [
    "InvalidCursorError",
    "SORTS",
    "SqlReader",
    "THREAD_CLASSES",
    "ThreadSummary",
    "checkpoint_time",
    "class_counts",
    "classify",
    "current_summary",
    "decode_cursor",
    "encode_cursor",
    "get_thread_summary",
    "lineage_has_delta_evidence",
    "list_threads",
    "list_threads_naive",
    "reader_for",
    "storage_by_mode",
    "stored_summary",
    "summary_conditions",
]

THREAD_CLASSES = ("full", "delta", "delta_counters_only", "migrated", "inconsistent")
#: ``sort`` values of :func:`list_threads` and the summary column each orders by (descending).
SORTS = {"updated": "last_checkpoint_id", "checkpoints": "checkpoint_count", "bytes": "bytes_total"}


class InvalidCursorError(DeerFlowError, ValueError):
    """A malformed pagination cursor, one made for another sort, or one holding values no database can bind.

    Cursors are unsigned base64url JSON: a made-up cursor of the right shape is
    accepted and only decides where the page starts. Drop the cursor to start
    from the first page.
    """


@dataclass(frozen=True)
class ThreadSummary:
    """One thread's inventory row (all from metadata and stored sizes).

    Attributes:
        thread_id: LangGraph thread id.
        checkpoint_count: checkpoints in every namespace (count).
        head_checkpoint_id: newest root-namespace checkpoint id (``None`` if only subgraph rows).
        last_checkpoint_id: newest checkpoint id in any namespace.
        updated_at: time of ``last_checkpoint_id`` (UUIDv6 time), UTC.
        marker_count: checkpoints carrying the DeerFlow delta marker (count).
        counters_count: checkpoints carrying LangGraph ``messages`` counters (count).
        bare_count: root-namespace checkpoints with step >= 0 and neither marker nor counters (count).
        head_marker: the head carries the DeerFlow marker.
        head_counters: the head carries LangGraph ``messages`` counters.
        mode: ``"delta"`` if any checkpoint shows delta evidence, else ``"full"``.
        mode_evidence: ``"deerflow_marker"``, ``"langgraph_counters"`` or ``None``.
        thread_class: one of :data:`THREAD_CLASSES`.
        bytes_checkpoints: stored bytes of its ``checkpoints`` rows (Postgres: on disk, compressed).
        bytes_blobs: bytes of its ``checkpoint_blobs`` values (Postgres; 0 on SQLite, which keeps
            values inside the checkpoint).
        bytes_writes: bytes of its pending-write values.
        replay_depth: updates since the last ``_DeltaSnapshot`` at the head (the head's
            ``counters_since_delta_snapshot.messages[0]``; 0 at a snapshot head; ``None`` for a
            head without delta evidence): the writes a reader replays to materialize the head.
    """

    thread_id: str
    checkpoint_count: int
    head_checkpoint_id: str | None
    last_checkpoint_id: str | None
    updated_at: dt.datetime | None
    marker_count: int
    counters_count: int
    bare_count: int
    head_marker: bool
    head_counters: bool
    mode: str
    mode_evidence: str | None
    thread_class: str
    bytes_checkpoints: int = 0
    bytes_blobs: int = 0
    bytes_writes: int = 0
    replay_depth: int | None = None

    @property
    def bytes_total(self) -> int:
        """All stored bytes of the thread (checkpoints + blobs + writes)."""
        return self.bytes_checkpoints + self.bytes_blobs + self.bytes_writes

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (``updated_at`` as ISO 8601, ``bytes_total`` included)."""
        out = asdict(self)
        out["updated_at"] = self.updated_at.isoformat() if self.updated_at else None
        out["bytes_total"] = self.bytes_total
        return out


def classify(*, marker_count: int, counters_count: int, bare_count: int, head_marker: bool, head_counters: bool) -> str:
    """The thread class from metadata counts (see the module docstring for the rules)."""
    if marker_count == 0 and counters_count == 0:
        return "full"
    head_delta = head_marker or head_counters
    if not head_delta:
        return "inconsistent"
    if marker_count == 0:
        return "delta_counters_only"
    if bare_count > 0:
        return "migrated"
    return "delta"


def _naive_sql(reader: SqlReader, where: str) -> str:
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


def _to_summary(row: dict[str, Any]) -> ThreadSummary:
    """A :class:`ThreadSummary` from a naive-aggregate row (classified here) or a summary-table row."""
    marker_count = int(row["marker_count"] or 0)
    counters_count = int(row["counters_count"] or 0)
    facts: dict[str, Any] = {
        "marker_count": marker_count,
        "counters_count": counters_count,
        "bare_count": int(row["bare_count"] or 0),
        "head_marker": bool(row["head_marker"]),
        "head_counters": bool(row["head_counters"]),
    }
    evidence = "deerflow_marker" if marker_count else ("langgraph_counters" if counters_count else None)
    replay = row.get("replay_depth")
    return ThreadSummary(
        thread_id=row["thread_id"],
        checkpoint_count=int(row["checkpoint_count"]),
        head_checkpoint_id=row["head_checkpoint_id"],
        last_checkpoint_id=row["last_checkpoint_id"],
        updated_at=checkpoint_time(row["last_checkpoint_id"]),
        mode="delta" if evidence else "full",
        mode_evidence=evidence,
        thread_class=row.get("thread_class") or classify(**facts),
        bytes_checkpoints=int(row.get("bytes_checkpoints") or 0),
        bytes_blobs=int(row.get("bytes_blobs") or 0),
        bytes_writes=int(row.get("bytes_writes") or 0),
        replay_depth=None if replay is None else int(replay),
        **facts,
    )


#: Bounds of a numeric cursor key: both backends keep the sort keys as signed 64-bit integers
#: (SQLite INTEGER, Postgres bigint) and refuse to bind a number outside them.
CURSOR_INT_MIN, CURSOR_INT_MAX = -(2**63), 2**63 - 1
_NOT_VALID = "cursor is not valid; start again without a cursor"


def _encode(value: list[Any]) -> str:
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def encode_cursor(last_checkpoint_id: str, thread_id: str) -> str:
    """An opaque keyset cursor (default sort) for the row after which the next page starts."""
    return _encode([last_checkpoint_id, thread_id])


def _decode(cursor: str) -> Any:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8"))
    # RecursionError: deeply nested JSON ("[[[[..."), which the decoder refuses by recursion depth.
    except (ValueError, UnicodeError, binascii.Error, RecursionError) as exc:
        raise InvalidCursorError(_NOT_VALID) from exc


def _bindable_text(value: Any) -> bool:
    """A string both backends accept as a parameter: no NUL (Postgres text) and valid UTF-8 (no lone surrogate)."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _bindable_int(value: Any) -> bool:
    """An integer (not a bool or float) within :data:`CURSOR_INT_MIN`..:data:`CURSOR_INT_MAX`."""
    return type(value) is int and CURSOR_INT_MIN <= value <= CURSOR_INT_MAX


def decode_cursor(cursor: str) -> tuple[str, str]:
    """Inverse of :func:`encode_cursor`.

    Cursors are unsigned: any ``[string, string]`` of bindable text is a
    position (it only decides where the page starts); only a malformed one
    is refused.

    Raises:
        InvalidCursorError: ``cursor`` is not ``[last_checkpoint_id, thread_id]`` as this module produces.
    """
    value = _decode(cursor)
    if not (isinstance(value, list) and len(value) == 2 and all(_bindable_text(v) for v in value)):
        raise InvalidCursorError(_NOT_VALID)
    return value[0], value[1]


def _keyset_cursor(sort: str, key: Any, thread_id: str) -> str:
    return encode_cursor(key or "", thread_id) if sort == "updated" else _encode([sort, int(key), thread_id])


def _made_for(value: Any) -> str | None:
    """The sort a decoded cursor was shaped for (``[id, thread]`` or ``[sort, key, thread]``), else ``None``."""
    if isinstance(value, list) and len(value) == 2:
        return "updated"
    if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str) and value[0] in SORTS:
        return value[0] if value[0] != "updated" else None
    return None


def _keyset_position(sort: str, cursor: str) -> tuple[Any, str]:
    """``(sort key, thread_id)`` of a cursor for ``sort``, every value checked before it reaches SQL.

    Raises:
        InvalidCursorError: malformed, made for another sort, or holding a value the database
            cannot bind (a number outside signed 64 bits, a non-integer key, text with NUL or a
            lone surrogate).
    """
    value = _decode(cursor)
    made_for = _made_for(value)
    if made_for is None:
        raise InvalidCursorError(_NOT_VALID)
    if made_for != sort:
        raise InvalidCursorError(f"cursor does not belong to sort={sort}; start again without a cursor")
    if sort == "updated":
        return decode_cursor(cursor)
    if not (_bindable_int(value[1]) and _bindable_text(value[2])):
        raise InvalidCursorError(_NOT_VALID)
    return value[1], value[2]


def _validate(limit: int, mode: str | None, thread_class: str | None, sort: str) -> None:
    if not 1 <= limit <= 1000:
        raise ValueError(f"limit must be between 1 and 1000; got {limit}")
    if mode not in (None, "full", "delta"):
        raise ValueError(f"mode must be 'full' or 'delta'; got {mode!r}")
    if thread_class not in (None, *THREAD_CLASSES):
        raise ValueError(f"class must be one of {', '.join(THREAD_CLASSES)}; got {thread_class!r}")
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}; got {sort!r}")


def summary_conditions(reader: Any, *, mode: str | None, thread_class: str | None,
                       q: str | None) -> tuple[list[str], list[Any]]:
    """``(conditions, params)`` selecting the list's filters on ``dfa_thread_summary`` (``?`` placeholders).

    Args:
        reader: the saver's :class:`deerflow.sqlread.SqlReader` (for its substring fragment).
        mode, thread_class: exact values, or ``None`` for any.
        q: a literal thread-id substring ignoring case (not a LIKE pattern: ``%`` and ``_`` match
            themselves), or ``None``.

    Returns:
        The conditions to ``AND`` together (empty: every thread) and their parameters, in order.
    """
    where, params = [], []
    for column, value in (("mode", mode), ("thread_class", thread_class)):
        if value:
            where.append(f"{column} = ?")
            params.append(value)
    if q:
        where.append(reader.contains("thread_id"))
        params.append(q)
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
) -> tuple[list[ThreadSummary], str | None]:
    """One page of threads from the summary table, largest sort key first, with a keyset cursor.

    Reads ``dfa_thread_summary`` (:mod:`deerflow.summary`) through an index
    per sort and filter: the cost is the page, not the database. With
    ``refresh`` the summary is first brought up to date if that is cheap
    (:func:`deerflow.summary.ensure_fresh`; staleness bound documented there).

    Paging is a keyset over ``(sort key, thread_id)``: a walk returns every
    thread whose key does not change meanwhile exactly once, and never a
    thread twice (keys only grow -- a thread updated during the walk moves
    behind the cursor); threads created meanwhile appear on a new walk.

    Args:
        saver: SQLite or Postgres saver.
        limit: page size (count, 1..1000).
        cursor: from a previous page's ``next_cursor`` with the same ``sort``.
        mode: ``"full"`` or ``"delta"`` to filter by :attr:`ThreadSummary.mode`.
        thread_class: one of :data:`THREAD_CLASSES` to filter by class.
        q: substring of the thread id, ignoring case (``%`` and ``_`` are literal).
        sort: ``"updated"`` (newest update first), ``"checkpoints"`` (most first) or
            ``"bytes"`` (heaviest first); see :data:`SORTS`.
        refresh: refresh the summary first when cheap.

    Returns:
        ``(threads, next_cursor)``; ``next_cursor`` is ``None`` on the last page.

    Raises:
        InvalidCursorError: a malformed cursor, or one made for another sort (:func:`_keyset_position`).
        ValueError: ``limit`` out of range, or an unknown ``mode``/``thread_class``/``sort``.
    """
    _validate(limit, mode, thread_class, sort)
    if not summary_table.readable(saver, refresh=refresh):
        return _page(_live_rows(saver, q), limit=limit, cursor=cursor, mode=mode, thread_class=thread_class,
                     sort=sort)
    key = SORTS[sort]
    reader = reader_for(saver)
    where, params = summary_conditions(reader, mode=mode, thread_class=thread_class, q=q)
    if cursor:
        where.append(f"({key}, thread_id) < (?, ?)")
        params.extend(_keyset_position(sort, cursor))
    rows = reader.query(
        f"SELECT * FROM dfa_thread_summary {'WHERE ' + ' AND '.join(where) if where else ''} "
        f"ORDER BY {key} DESC, thread_id DESC LIMIT {int(limit) + 1}", params)
    page = [_to_summary(r) for r in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        next_cursor = _keyset_cursor(sort, rows[limit - 1][key], rows[limit - 1]["thread_id"])
    return page, next_cursor


def _live_rows(saver: Any, q: str | None = None) -> list[dict[str, Any]]:
    """Every thread's row aggregated from LangGraph's tables now (when the summary cannot be used)."""
    reader = reader_for(saver)
    where, params = "thread_id IS NOT NULL", []
    if q:
        where, params = reader.contains("thread_id"), [q]
    return reader.query(summary_table.row_select_sql(reader, where), summary_table.row_params(reader, params))


def _page(rows: list[dict[str, Any]], *, limit: int, cursor: str | None, mode: str | None,
          thread_class: str | None, sort: str) -> tuple[list[ThreadSummary], str | None]:
    """Filter, order and cut one keyset page in memory (the same order and cursors as the SQL path)."""
    key = SORTS[sort]
    rows = [r for r in rows if (not mode or r["mode"] == mode) and (not thread_class or r["thread_class"] == thread_class)]
    empty = "" if sort == "updated" else 0
    rows.sort(key=lambda r: (r[key] if r[key] is not None else empty, r["thread_id"]), reverse=True)
    if cursor:
        after = _keyset_position(sort, cursor)
        rows = [r for r in rows if (r[key], r["thread_id"]) < after]
    next_cursor = None
    if len(rows) > limit:
        next_cursor = _keyset_cursor(sort, rows[limit - 1][key], rows[limit - 1]["thread_id"])
    return [_to_summary(r) for r in rows[:limit]], next_cursor


def list_threads_naive(saver: Any, *, limit: int = 50, cursor: str | None = None, mode: str | None = None,
                       thread_class: str | None = None, q: str | None = None) -> tuple[list[ThreadSummary], str | None]:
    """The pre-summary implementation: aggregate every checkpoint per request (the benchmark's baseline).

    Same arguments, order and cursors as :func:`list_threads` with ``sort="updated"``;
    storage fields stay 0. Cost: a ``GROUP BY thread_id`` over all of ``checkpoints``.
    """
    _validate(limit, mode, thread_class, "updated")
    reader = reader_for(saver)
    where, params = "", []
    if q:
        where = f"WHERE {reader.contains('c.thread_id')}"
        params.append(q)
    rows = [_to_summary(r) for r in reader.query(_naive_sql(reader, where), params)]
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


def get_thread_summary(saver: Any, thread_id: str) -> ThreadSummary | None:
    """The inventory row of one thread computed now from its own rows (exact), or ``None`` when it has none.

    Reads LangGraph's tables only (through the ``thread_id`` indexes); writes nothing.
    """
    reader = reader_for(saver)
    rows = reader.query(summary_table.row_select_sql(reader, "thread_id = ?"),
                        summary_table.row_params(reader, [thread_id]))
    return _to_summary(rows[0]) if rows else None


def stored_summary(saver: Any, thread_id: str) -> ThreadSummary | None:
    """The thread's row as the summary table holds it now (possibly stale), or ``None`` (no row, or
    the summary cannot be read by this role)."""
    if summary_table.access(saver) == "none":
        return None
    rows = reader_for(saver).query("SELECT * FROM dfa_thread_summary WHERE thread_id = ?", [thread_id])
    return _to_summary(rows[0]) if rows else None


def current_summary(saver: Any, thread_id: str) -> ThreadSummary | None:
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
    return _to_summary(row) if same else None


def class_counts(saver: Any, *, refresh: bool = True) -> dict[str, int]:
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


def storage_by_mode(saver: Any, *, refresh: bool = True) -> dict[str, dict[str, int]]:
    """Totals per mode: ``{"full"|"delta": {"threads", "bytes_checkpoints", "bytes_blobs", "bytes_writes",
    "bytes_total"}}`` (counts and bytes; both modes always present). Summary first, live fallback."""
    out = {m: dict.fromkeys(_STORAGE_KEYS, 0) for m in ("full", "delta")}
    if summary_table.readable(saver, refresh=refresh):
        for r in reader_for(saver).query(
                "SELECT mode, COUNT(*) AS threads, SUM(bytes_checkpoints) AS bytes_checkpoints, SUM(bytes_blobs) "
                "AS bytes_blobs, SUM(bytes_writes) AS bytes_writes, SUM(bytes_total) AS bytes_total "
                "FROM dfa_thread_summary GROUP BY mode"):
            out[r["mode"]] = {k: int(r[k] or 0) for k in _STORAGE_KEYS}
        return out
    for r in _live_rows(saver):
        totals = out[r["mode"]]
        totals["threads"] += 1
        for k in _STORAGE_KEYS[1:]:
            totals[k] += int(r[k] or 0)
    return out


def lineage_has_delta_evidence(saver: Any, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
    """True when the checkpoint or any ancestor (``parent_checkpoint_id`` chain, same namespace) shows delta.

    This is the dashboard's thread-level gate (issue 3, item 6): LangGraph
    drops the counters on snapshot checkpoints, so a marker-less delta thread
    looks full there; its ancestors still carry the counters. ``UNION``
    drops a repeated row, so a parent cycle cannot loop.

    Cost: one index range scan of the namespace first (no row with evidence
    -- every full thread -- answers False without walking); otherwise the
    walk, which stops at the first evidence (usually the checkpoint itself).
    """
    reader = reader_for(saver)
    r = reader
    evidence = (f"EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = ? AND c.checkpoint_ns = ? "
                f"AND ({r.marker()} OR {r.counters()}))")
    any_evidence = reader.query(f"SELECT {r.truthy(evidence)} AS e", [thread_id, checkpoint_ns])
    if not any_evidence[0]["e"]:
        return False
    sql = f"""
        WITH RECURSIVE lineage(checkpoint_id, parent_checkpoint_id, delta) AS (
            SELECT c.checkpoint_id, c.parent_checkpoint_id,
                   {r.truthy(f"{r.marker()} OR {r.counters()}")}
            FROM checkpoints c
            WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = ?
            UNION
            SELECT c.checkpoint_id, c.parent_checkpoint_id,
                   {r.truthy(f"{r.marker()} OR {r.counters()}")}
            FROM lineage l JOIN checkpoints c
              ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = l.parent_checkpoint_id
            WHERE l.delta = 0
        )
        SELECT MAX(delta) AS delta FROM lineage
    """
    rows = reader.query(sql, [thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns])
    return bool(rows and rows[0]["delta"])
