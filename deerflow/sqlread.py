"""SQL on a LangGraph saver's own connection, portable across its SQLite and Postgres layouts.

:class:`SqlReader` runs queries (``?`` placeholders on both dialects) and
transactions on the saver's connection or pool, and renders the SQL
fragments the inventory, the summary and the census share: the DeerFlow
marker, LangGraph's ``messages`` counters, the step, and stored sizes.

Layouts (LangGraph's, never altered): Postgres ``checkpoints`` (JSONB
``checkpoint``/``metadata``), ``checkpoint_blobs``, ``checkpoint_writes``;
SQLite ``checkpoints`` (msgpack ``checkpoint`` BLOB, JSON ``metadata`` BLOB)
and ``writes``, with every channel value inside the checkpoint blob.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, COUNTERS_METADATA_KEY

__all__ = ["SqlReader", "Tx", "checkpoint_time", "reader_for", "table_exists"]

_GREGORIAN_EPOCH = dt.datetime(1582, 10, 15, tzinfo=dt.UTC)


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


def table_exists(db: Tx | SqlReader, name: str) -> bool:
    """True when table ``name`` exists (SQLite: ``sqlite_master``; Postgres: ``to_regclass`` on the search path).

    Args:
        db: a :class:`Tx` or :class:`SqlReader` (anything with ``dialect`` and ``query``).
        name: an unquoted table name.
    """
    if db.dialect == "sqlite":
        row = db.query("SELECT COUNT(*) AS x FROM sqlite_master WHERE type = 'table' AND name = ?", [name])[0]
    else:
        row = db.query("SELECT to_regclass(?) IS NOT NULL AS x", [name])[0]
    return bool(row["x"])


class Tx:
    """Statements inside one open transaction (see :meth:`SqlReader.transaction`)."""

    def __init__(self, dialect: str, conn: Any):
        self.dialect = dialect
        self.conn = conn

    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else sql.replace("%", "%%").replace("?", "%s")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts (``?`` placeholders)."""
        cur = self.conn.execute(self._sql(sql), tuple(params))
        if self.dialect == "sqlite":
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        return [dict(r) for r in cur.fetchall()]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the affected row count."""
        return self.conn.execute(self._sql(sql), tuple(params)).rowcount


class SqlReader:
    """Run SQL on a saver's own connection (SQLite or Postgres).

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver`` (on a connection or a pool).

    Attributes:
        dialect: ``"sqlite"`` or ``"postgres"``.
        writes_table: ``"writes"`` (SQLite) or ``"checkpoint_writes"`` (Postgres).
    """

    def __init__(self, saver: Any):
        self.saver = saver
        self.dialect = "sqlite" if isinstance(getattr(saver, "conn", None), sqlite3.Connection) else "postgres"
        self.writes_table = "writes" if self.dialect == "sqlite" else "checkpoint_writes"

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts. ``sql`` uses ``?`` placeholders; they are translated for Postgres."""
        if self.dialect == "sqlite":
            with self.saver.lock:
                return Tx("sqlite", self.saver.conn).query(sql, params)
        with self._pg_connection() as conn:
            return Tx("postgres", conn).query(sql, params)

    @contextmanager
    def _pg_connection(self) -> Iterator[Any]:
        conn_or_pool = self.saver.conn
        if hasattr(conn_or_pool, "connection"):
            with conn_or_pool.connection() as conn:
                yield conn
        else:
            yield conn_or_pool

    @contextmanager
    def reading(self) -> Iterator[Tx]:
        """Several reads on one connection, outside any explicit transaction (nothing is locked)."""
        if self.dialect == "sqlite":
            with self.saver.lock:
                yield Tx("sqlite", self.saver.conn)
            return
        with self._pg_connection() as conn:
            yield Tx("postgres", conn)

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """One transaction on the saver's connection: committed on success, rolled back on error.

        SQLite takes the write lock at once (``BEGIN IMMEDIATE``) under the
        saver's own lock; Postgres uses a pool connection (or a savepoint
        when the saver's single connection is already inside a transaction).
        """
        if self.dialect == "sqlite":
            with self.saver.lock:
                conn = self.saver.conn
                if conn.in_transaction:
                    conn.commit()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield Tx("sqlite", conn)
                except BaseException:
                    conn.rollback()
                    raise
                conn.commit()
            return
        with self._pg_connection() as conn, conn.transaction():
            yield Tx("postgres", conn)

    @contextmanager
    def autocommit(self) -> Iterator[Tx | None]:
        """A Postgres connection in autocommit mode (for ``CREATE INDEX CONCURRENTLY``), else ``None``."""
        if self.dialect == "sqlite":
            yield None
            return
        with self._pg_connection() as conn:
            yield Tx("postgres", conn) if conn.autocommit else None

    # -- SQL fragments over a checkpoints row aliased ``alias`` -----------------------
    def marker(self, alias: str = "c") -> str:
        """True when the row carries the DeerFlow delta marker."""
        if self.dialect == "sqlite":
            return f"COALESCE(json_extract(CAST({alias}.metadata AS TEXT), '$.{CHECKPOINT_MODE_METADATA_KEY}') = 'delta', 0)"
        return f"COALESCE({alias}.metadata->>'{CHECKPOINT_MODE_METADATA_KEY}' = 'delta', false)"

    def counters(self, alias: str = "c") -> str:
        """True when the row carries LangGraph's ``messages`` counters."""
        if self.dialect == "sqlite":
            return f"(json_extract(CAST({alias}.metadata AS TEXT), '$.{COUNTERS_METADATA_KEY}.messages') IS NOT NULL)"
        return f"(({alias}.metadata->'{COUNTERS_METADATA_KEY}'->'messages') IS NOT NULL)"

    def counter(self, alias: str = "c", index: int = 0) -> str:
        """``counters_since_delta_snapshot.messages[index]`` as an integer (0: updates, 1: supersteps), or NULL."""
        if self.dialect == "sqlite":
            return (f"CAST(json_extract(CAST({alias}.metadata AS TEXT), "
                    f"'$.{COUNTERS_METADATA_KEY}.messages[{index}]') AS INTEGER)")
        return f"(({alias}.metadata->'{COUNTERS_METADATA_KEY}'->'messages'->>{index})::bigint)"

    def step(self, alias: str = "c") -> str:
        """The metadata ``step`` as an integer, or NULL."""
        if self.dialect == "sqlite":
            return f"CAST(json_extract(CAST({alias}.metadata AS TEXT), '$.step') AS INTEGER)"
        return f"(CASE WHEN jsonb_typeof({alias}.metadata->'step') = 'number' THEN ({alias}.metadata->>'step')::bigint END)"

    def contains(self, column: str) -> str:
        """``column`` contains the next ``?`` parameter as a literal substring, ignoring case.

        Both sides go through the database's ``lower()`` (SQLite: ASCII letters
        only; Postgres: the database's locale), so ``%`` and ``_`` are plain
        characters, unlike ``LIKE``.
        """
        if self.dialect == "sqlite":
            return f"instr(lower({column}), lower(?)) > 0"
        return f"strpos(lower({column}), lower(?)) > 0"

    def truthy(self, expr: str) -> str:
        """``expr`` as an integer 0/1, portable across both dialects."""
        return f"(CASE WHEN {expr} THEN 1 ELSE 0 END)"

    # -- stored sizes (bytes), the same definition as deerflow.convert's stored_bytes ---
    def checkpoint_bytes(self, alias: str = "c") -> str:
        """Stored bytes of one ``checkpoints`` row (checkpoint + metadata; Postgres: on-disk, compressed)."""
        if self.dialect == "sqlite":
            return f"(COALESCE(LENGTH({alias}.checkpoint), 0) + COALESCE(LENGTH({alias}.metadata), 0))"
        return f"(pg_column_size({alias}.checkpoint) + pg_column_size({alias}.metadata))"

    def write_bytes(self, alias: str = "w") -> str:
        """Bytes of one pending-write row's serialized value."""
        column = "value" if self.dialect == "sqlite" else "blob"
        return f"COALESCE(LENGTH({alias}.{column}), 0)"


def reader_for(saver: Any) -> SqlReader:
    """A :class:`SqlReader` over ``saver``.

    Raises:
        TypeError: the saver keeps no SQL tables (``InMemorySaver``).
    """
    if not hasattr(saver, "conn"):
        raise TypeError(f"{type(saver).__name__} has no SQL tables to inventory")
    return SqlReader(saver)
