"""SQL on a LangGraph saver's own connection, portable across its SQLite and Postgres layouts.

:class:`SqlReader` runs queries (``?`` placeholders on both dialects) and
transactions on the saver's connection or pool (told apart by type:
:func:`postgres_connection`); :class:`Tx` runs statements
inside one. Both carry a :class:`deerflow.storage.dialect.Dialect` as ``dialect``, and
the SQL fragments the inventory, the summary and the census share (the
DeerFlow marker, LangGraph's ``messages`` counters, the step, stored sizes)
are the dialect's own, reachable from a reader as before (``reader.marker()``).

Driver errors raised inside these calls reach the caller as
:class:`deerflow.errors.StorageError` subclasses (:mod:`deerflow.storage.driver_errors`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from deerflow.errors import NoSqlTablesError
from deerflow.storage.dialect import Dialect
from deerflow.storage.driver_errors import translated

__all__ = ["SqlReader", "Tx", "checkpoint_time", "has_sql_tables", "postgres_connection", "reader_for", "table_exists"]

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
    return bool(db.query(Dialect(db.dialect).table_exists_sql(), [name])[0]["x"])


class _Fragments:
    """The dialect's SQL fragments, as methods of the reader or transaction that carries it."""

    dialect: Dialect

    def delta_evidence(self, alias: str = "c") -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.delta_evidence`."""
        return self.dialect.delta_evidence(alias)

    def marker(self, alias: str = "c") -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.marker`."""
        return self.dialect.marker(alias)

    def counters(self, alias: str = "c") -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.counters`."""
        return self.dialect.counters(alias)

    def counter(self, alias: str = "c", index: int = 0) -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.counter`."""
        return self.dialect.counter(alias, index)

    def step(self, alias: str = "c") -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.step`."""
        return self.dialect.step(alias)

    def contains(self, column: str) -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.contains`."""
        return self.dialect.contains(column)

    def truthy(self, expr: str) -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.truthy`."""
        return Dialect.truthy(expr)

    def checkpoint_bytes(self, alias: str | None = "c") -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.checkpoint_bytes`."""
        return self.dialect.checkpoint_bytes(alias)

    def write_bytes(self, alias: str | None = "w") -> str:
        """See :meth:`deerflow.storage.dialect.Dialect.write_bytes`."""
        return self.dialect.write_bytes(alias)

    @property
    def writes_table(self) -> str:
        """``"writes"`` (SQLite) or ``"checkpoint_writes"`` (Postgres)."""
        return self.dialect.writes_table


class Tx(_Fragments):
    """Statements on one open connection (see :meth:`SqlReader.transaction`).

    Args:
        dialect: a :class:`Dialect` or its value (``"sqlite"`` / ``"postgres"``).
        conn: a ``sqlite3.Connection`` or a psycopg connection with ``dict_row``.
    """

    def __init__(self, dialect: str, conn: Any):
        self.dialect = Dialect(dialect)
        self.conn = conn

    def _sql(self, sql: str) -> str:
        return self.dialect.sql(sql)

    def query(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[dict[str, Any]]:
        """Rows as dicts (``?`` placeholders).

        Args:
            binary: Postgres: the rows come in the binary format, which parses long arrays several times faster
                than their text; SQLite ignores it.

        Raises:
            StorageError: the driver failed (see :mod:`deerflow.storage.driver_errors`).
        """
        with translated():
            if binary and self.dialect is Dialect.POSTGRES:
                return self.dialect.rows(self.conn.execute(self._sql(sql), tuple(params), binary=True))
            return self.dialect.rows(self.conn.execute(self._sql(sql), tuple(params)))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the affected row count.

        Raises:
            StorageError: the driver failed (see :mod:`deerflow.storage.driver_errors`).
        """
        with translated():
            return int(self.conn.execute(self._sql(sql), tuple(params)).rowcount)


class SqlReader(_Fragments):
    """Run SQL on a saver's own connection (SQLite or Postgres).

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver`` (on a connection or a pool).

    Attributes:
        dialect: :class:`Dialect` (``"sqlite"`` or ``"postgres"``).
        writes_table: ``"writes"`` (SQLite) or ``"checkpoint_writes"`` (Postgres).

    Raises:
        NoSqlTablesError: the saver keeps no SQL tables (``InMemorySaver``).
        TypeError: the saver's ``conn`` is neither a connection nor a pool (:meth:`Dialect.of_connection`);
            an asynchronous one is refused when first used (:func:`postgres_connection`).
    """

    def __init__(self, saver: Any):
        dialect = Dialect.of_saver(saver)
        if dialect is None:
            raise NoSqlTablesError(type(saver).__name__)
        self.saver = saver
        self.dialect = dialect

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows as dicts. ``sql`` uses ``?`` placeholders; they are translated for Postgres."""
        with self.reading() as tx:
            return tx.query(sql, params)

    @contextmanager
    def _pg_connection(self) -> Iterator[Any]:
        with postgres_connection(self.saver.conn, lock=getattr(self.saver, "lock", None)) as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[Tx]:
        """Several reads on one connection, outside any explicit transaction (nothing is locked)."""
        if self.dialect is Dialect.SQLITE:
            with self.saver.lock:
                yield Tx(self.dialect, self.saver.conn)
            return
        with self._pg_connection() as conn:
            yield Tx(self.dialect, conn)

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """One transaction on the saver's connection: committed on success, rolled back on error.

        SQLite takes the write lock at once (``BEGIN IMMEDIATE``) under the
        saver's own lock; Postgres uses a pool connection (or a savepoint
        when the saver's single connection is already inside a transaction).

        Raises:
            StorageError: beginning or committing failed (e.g. the database is locked).
        """
        if self.dialect is Dialect.SQLITE:
            with self.saver.lock:
                conn = self.saver.conn
                with translated():
                    if conn.in_transaction:
                        conn.commit()
                    self.dialect.begin(conn, write=True)
                try:
                    yield Tx(self.dialect, conn)
                except BaseException:
                    conn.rollback()
                    raise
                with translated():
                    conn.commit()
            return
        with self._pg_connection() as conn, translated(), conn.transaction():
            yield Tx(self.dialect, conn)

    @contextmanager
    def autocommit(self) -> Iterator[Tx | None]:
        """A Postgres connection in autocommit mode (for ``CREATE INDEX CONCURRENTLY``), else ``None``."""
        if self.dialect is Dialect.SQLITE:
            yield None
            return
        with self._pg_connection() as conn:
            yield Tx(self.dialect, conn) if conn.autocommit else None


@contextmanager
def postgres_connection(conn_or_pool: Any, *, lock: Any = None) -> Iterator[Any]:
    """The psycopg connection behind a Postgres saver's ``conn``, chosen by type.

    A ``psycopg.Connection`` is used as it is (under ``lock``, the saver's own,
    when given: one connection serves one statement at a time, as the saver's
    ``_cursor()`` keeps it). A ``psycopg_pool.ConnectionPool`` (or subclass)
    lends one of its connections for the block. Nothing is guessed from
    attributes: every psycopg connection has a ``connection`` property (itself),
    so "has ``.connection``" does not tell a pool from a connection.

    Args:
        conn_or_pool: a saver's ``conn``.
        lock: the saver's ``lock`` (taken only around a single connection).

    Raises:
        TypeError: an asynchronous connection or pool, or not a psycopg object at all.
        StorageError: the pool could not lend a connection.
    """
    import psycopg
    from psycopg_pool import ConnectionPool

    if isinstance(conn_or_pool, psycopg.Connection):
        with lock if lock is not None else nullcontext():
            yield conn_or_pool
        return
    if isinstance(conn_or_pool, ConnectionPool):
        with translated(), conn_or_pool.connection() as conn:
            yield conn
        return
    raise TypeError(f"SqlReader needs a psycopg Connection or a psycopg_pool ConnectionPool, "
                    f"not {type(conn_or_pool).__name__}")


def has_sql_tables(saver: Any) -> bool:
    """True when ``saver`` keeps its checkpoints in SQL tables (SQLite or Postgres), False for ``InMemorySaver``.

    Raises:
        TypeError: the saver's ``conn`` is neither a connection nor a pool (:meth:`Dialect.of_connection`).
    """
    return Dialect.of_saver(saver) is not None


def reader_for(saver: Any) -> SqlReader:
    """A :class:`SqlReader` over ``saver``.

    Check :func:`has_sql_tables` first where a memory saver is a normal case.

    Raises:
        NoSqlTablesError: the saver keeps no SQL tables (``InMemorySaver``);
            also a ``TypeError``, for callers written before it existed.
    """
    return SqlReader(saver)
