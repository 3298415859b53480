"""Metadata-only inventory of a checkpoint database: threads, classes, lineage evidence.

Nothing here materializes state: every fact comes from the ``checkpoints``
table's ids and metadata (the DeerFlow marker and LangGraph's
``counters_since_delta_snapshot``, spec "Marker contract"). Works on
LangGraph's SQLite saver (metadata is JSON text in a BLOB) and Postgres saver
(metadata is JSONB) through the saver's own connection.

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
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, COUNTERS_METADATA_KEY

__all__ = [
    "THREAD_CLASSES",
    "InvalidCursorError",
    "SqlReader",
    "ThreadSummary",
    "checkpoint_time",
    "classify",
    "get_thread_summary",
    "lineage_has_delta_evidence",
    "list_threads",
    "reader_for",
]

THREAD_CLASSES = ("full", "delta", "delta_counters_only", "migrated", "inconsistent")
_GREGORIAN_EPOCH = dt.datetime(1582, 10, 15, tzinfo=dt.UTC)


class InvalidCursorError(ValueError):
    """A pagination cursor that this module did not produce (or that was altered)."""


def checkpoint_time(checkpoint_id: str | None) -> dt.datetime | None:
    """The creation time embedded in a LangGraph (UUIDv6) checkpoint id, UTC; ``None`` if not v6."""
    if not checkpoint_id:
        return None
    hexid = checkpoint_id.replace("-", "")
    if len(hexid) != 32 or hexid[12] != "6":
        return None
    try:
        ticks = (int(hexid[0:8], 16) << 28) | (int(hexid[8:12], 16) << 12) | int(hexid[13:16], 16)
    except ValueError:
        return None
    return _GREGORIAN_EPOCH + dt.timedelta(microseconds=ticks // 10)


class SqlReader:
    """Run read-only SQL on a saver's own connection (SQLite or Postgres).

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver``.

    Attributes:
        dialect: ``"sqlite"`` or ``"postgres"``.
    """

    def __init__(self, saver: Any):
        self.saver = saver
        self.dialect = "sqlite" if isinstance(getattr(saver, "conn", None), sqlite3.Connection) else "postgres"

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts. ``sql`` uses ``?`` placeholders; they are translated for Postgres."""
        if self.dialect == "sqlite":
            with self.saver.lock:
                cur = self.saver.conn.execute(sql, tuple(params))
                names = [d[0] for d in cur.description]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        sql = sql.replace("%", "%%").replace("?", "%s")
        conn_or_pool = self.saver.conn
        if hasattr(conn_or_pool, "connection"):
            with conn_or_pool.connection() as conn, conn.cursor() as cur:
                cur.execute(sql, tuple(params))
                return list(cur.fetchall())
        with conn_or_pool.cursor() as cur:
            cur.execute(sql, tuple(params))
            return list(cur.fetchall())

    # SQL fragments over a checkpoints row aliased ``alias``.
    def marker(self, alias: str = "c") -> str:
        if self.dialect == "sqlite":
            return f"COALESCE(json_extract(CAST({alias}.metadata AS TEXT), '$.{CHECKPOINT_MODE_METADATA_KEY}') = 'delta', 0)"
        return f"COALESCE({alias}.metadata->>'{CHECKPOINT_MODE_METADATA_KEY}' = 'delta', false)"

    def counters(self, alias: str = "c") -> str:
        if self.dialect == "sqlite":
            return f"(json_extract(CAST({alias}.metadata AS TEXT), '$.{COUNTERS_METADATA_KEY}.messages') IS NOT NULL)"
        return f"(({alias}.metadata->'{COUNTERS_METADATA_KEY}'->'messages') IS NOT NULL)"

    def step(self, alias: str = "c") -> str:
        if self.dialect == "sqlite":
            return f"CAST(json_extract(CAST({alias}.metadata AS TEXT), '$.step') AS INTEGER)"
        return f"(CASE WHEN jsonb_typeof({alias}.metadata->'step') = 'number' THEN ({alias}.metadata->>'step')::bigint END)"

    def contains(self, column: str) -> str:
        """``column`` contains the next ``?`` parameter as a literal, case-sensitive substring."""
        if self.dialect == "sqlite":
            return f"instr({column}, ?) > 0"
        return f"strpos({column}, ?) > 0"

    def truthy(self, expr: str) -> str:
        """``expr`` as an integer 0/1, portable across both dialects."""
        return f"(CASE WHEN {expr} THEN 1 ELSE 0 END)"


def reader_for(saver: Any) -> SqlReader:
    """A :class:`SqlReader` over ``saver``.

    Raises:
        TypeError: the saver keeps no SQL tables (``InMemorySaver``).
    """
    if not hasattr(saver, "conn"):
        raise TypeError(f"{type(saver).__name__} has no SQL tables to inventory")
    return SqlReader(saver)


@dataclass(frozen=True)
class ThreadSummary:
    """One thread's inventory row (all from metadata).

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

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (``updated_at`` as ISO 8601)."""
        out = asdict(self)
        out["updated_at"] = self.updated_at.isoformat() if self.updated_at else None
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


def _summary_sql(reader: SqlReader, where: str) -> str:
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
    marker_count = int(row["marker_count"] or 0)
    counters_count = int(row["counters_count"] or 0)
    facts = {
        "marker_count": marker_count,
        "counters_count": counters_count,
        "bare_count": int(row["bare_count"] or 0),
        "head_marker": bool(row["head_marker"]),
        "head_counters": bool(row["head_counters"]),
    }
    evidence = "deerflow_marker" if marker_count else ("langgraph_counters" if counters_count else None)
    return ThreadSummary(
        thread_id=row["thread_id"],
        checkpoint_count=int(row["checkpoint_count"]),
        head_checkpoint_id=row["head_checkpoint_id"],
        last_checkpoint_id=row["last_checkpoint_id"],
        updated_at=checkpoint_time(row["last_checkpoint_id"]),
        mode="delta" if evidence else "full",
        mode_evidence=evidence,
        thread_class=classify(**facts),
        **facts,
    )


def encode_cursor(last_checkpoint_id: str, thread_id: str) -> str:
    """An opaque keyset cursor for the row after which the next page starts."""
    raw = json.dumps([last_checkpoint_id, thread_id], ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """Inverse of :func:`encode_cursor`.

    Raises:
        InvalidCursorError: ``cursor`` is not a cursor this module produced.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8"))
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise InvalidCursorError("cursor is not valid; start again without a cursor") from exc
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise InvalidCursorError("cursor is not valid; start again without a cursor")
    return value[0], value[1]


def list_threads(
    saver: Any,
    *,
    limit: int = 50,
    cursor: str | None = None,
    mode: str | None = None,
    thread_class: str | None = None,
    q: str | None = None,
) -> tuple[list[ThreadSummary], str | None]:
    """One page of threads, newest update first, with a keyset cursor.

    Args:
        saver: SQLite or Postgres saver.
        limit: page size (count, 1..1000).
        cursor: from a previous page's ``next_cursor``.
        mode: ``"full"`` or ``"delta"`` to filter by :attr:`ThreadSummary.mode`.
        thread_class: one of :data:`THREAD_CLASSES` to filter by class.
        q: case-sensitive substring of the thread id.

    Returns:
        ``(threads, next_cursor)``; ``next_cursor`` is ``None`` on the last page.

    Raises:
        InvalidCursorError: a cursor that was not produced here.
        ValueError: ``limit`` out of range, or an unknown ``mode``/``thread_class``.
    """
    if not 1 <= limit <= 1000:
        raise ValueError(f"limit must be between 1 and 1000; got {limit}")
    if mode not in (None, "full", "delta"):
        raise ValueError(f"mode must be 'full' or 'delta'; got {mode!r}")
    if thread_class not in (None, *THREAD_CLASSES):
        raise ValueError(f"class must be one of {', '.join(THREAD_CLASSES)}; got {thread_class!r}")
    reader = reader_for(saver)
    where, params = "", []
    if q:
        # A literal, case-sensitive substring on both dialects (SQLite's LIKE
        # ignores ASCII case and both treat % and _ as wildcards).
        where = f"WHERE {reader.contains('c.thread_id')}"
        params.append(q)
    rows = [_to_summary(r) for r in reader.query(_summary_sql(reader, where), params)]
    if mode:
        rows = [r for r in rows if r.mode == mode]
    if thread_class:
        rows = [r for r in rows if r.thread_class == thread_class]
    rows.sort(key=lambda r: (r.last_checkpoint_id or "", r.thread_id), reverse=True)
    if cursor:
        after = decode_cursor(cursor)
        rows = [r for r in rows if (r.last_checkpoint_id or "", r.thread_id) < after]
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit:
        last = page[-1]
        next_cursor = encode_cursor(last.last_checkpoint_id or "", last.thread_id)
    return page, next_cursor


def get_thread_summary(saver: Any, thread_id: str) -> ThreadSummary | None:
    """The inventory row of one thread, or ``None`` when it has no checkpoints."""
    reader = reader_for(saver)
    rows = reader.query(_summary_sql(reader, "WHERE c.thread_id = ?"), [thread_id])
    return _to_summary(rows[0]) if rows else None


def lineage_has_delta_evidence(saver: Any, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
    """True when the checkpoint or any ancestor (``parent_checkpoint_id`` chain, same namespace) shows delta.

    This is the dashboard's thread-level gate (issue 3, item 6): LangGraph
    drops the counters on snapshot checkpoints, so a marker-less delta thread
    looks full there; its ancestors still carry the counters. ``UNION``
    drops a repeated row, so a parent cycle cannot loop.
    """
    reader = reader_for(saver)
    r = reader
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
