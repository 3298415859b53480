"""Open the LangGraph checkpoint saver a ``database:`` block names.

Backends (spec, "Facts from DeerFlow's configuration"): ``memory``
(``InMemorySaver``), ``sqlite`` (``SqliteSaver`` / ``AsyncSqliteSaver`` on
``{sqlite_dir}/deerflow.db``) and ``postgres`` (``PostgresSaver`` /
``AsyncPostgresSaver`` on a psycopg pool with ``autocommit``,
``prepare_threshold=0`` and ``dict_row``, the settings LangGraph requires;
``postgres_schema`` becomes the connection's ``search_path``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.errors import ConfigError
from deerflow.storage.dialect import Dialect, postgres_connect_kwargs
from deerflow.storage.pool import FailFastConnectionPool
from deerflow.storage.sqlread import Tx, table_exists

if TYPE_CHECKING:  # the savers are imported where a backend is opened: error paths skip LangGraph's imports
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "SQLITE_SAVER_TABLES",
    "is_wal_file",
    "open_async_checkpointer",
    "open_checkpointer",
    "sqlite_checkpoint_path",
]


def sqlite_checkpoint_path(database: DatabaseConfig) -> Path:
    """``{sqlite_dir}/deerflow.db`` (a relative ``sqlite_dir`` is relative to the working directory)."""
    return database.sqlite_path()


def _require_sqlite_file(database: DatabaseConfig, *, create: bool) -> Path:
    """The SQLite checkpoint path, its directory made when ``create``.

    Raises:
        ConfigError: the file is missing and ``create`` is false.
    """
    path = sqlite_checkpoint_path(database)
    if not path.exists() and not create:
        raise ConfigError(
            f"SQLite checkpoint file {path} does not exist (database.sqlite_dir={database.sqlite_dir!r}). "
            "Point sqlite_dir at the directory holding DeerFlow's deerflow.db.",
            key="database.sqlite_dir",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _sqlite_connection(database: DatabaseConfig, *, create: bool) -> sqlite3.Connection:
    _require_sqlite_file(database, create=create)
    conn: sqlite3.Connection = Dialect.SQLITE.connect(database, autocommit=False, timeout=30)
    return conn


#: The tables ``SqliteSaver.setup()`` creates (LangGraph's SQLite schema).
SQLITE_SAVER_TABLES = Dialect.SQLITE.saver_tables


def is_wal_file(path: Path) -> bool:
    """True when the SQLite file at ``path`` is in WAL mode (header bytes 18 and 19 are 2; SQLite file format).

    A WAL file can be read by a process that may not write it only while its
    ``-shm`` file exists (another process has it open); a rollback-journal
    file always can. ``False`` for a missing or unreadable file.
    """
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header[18:20] == b"\x02\x02"


def _readonly_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "readonly database" in str(exc).lower()


def _has_saver_tables(conn: sqlite3.Connection) -> bool:
    return all(table_exists(Tx(Dialect.SQLITE, conn), name) for name in SQLITE_SAVER_TABLES)


def _setup_sqlite(saver: Any, conn: sqlite3.Connection) -> None:
    """``saver.setup()``, except on a file this process may only read that already holds the saver's tables.

    ``SqliteSaver.setup()`` (run before every call until it succeeds) sets WAL
    and creates the tables, both writes, so a file readable but not writable
    by this process (a read-only mount, another owner, a copy handed to
    support) could not be browsed. With the tables there, nothing needs
    creating: the saver is marked set up and reads the file as it is; writes
    still fail with SQLite's "attempt to write a readonly database".

    Raises:
        sqlite3.OperationalError: ``setup()`` failed for another reason, or the
            read-only file lacks the saver's tables.
    """
    try:
        saver.setup()
    except sqlite3.OperationalError as exc:
        if not _readonly_error(exc) or not _has_saver_tables(conn):
            raise
        saver.is_setup = True
        # What LangGraph's own setup() decides for a read-only file whose ``writes`` predates ``task_path``
        # (it cannot add the column) and never reaches here, its WAL pragma having failed first.
        columns = {row[1] for row in conn.execute("PRAGMA table_info(writes)")}
        if hasattr(saver, "_has_task_path"):
            saver._has_task_path = "task_path" in columns


@contextmanager
def open_checkpointer(database: DatabaseConfig, *, create: bool = False, pool_size: int = 4,
                      timeout: float = 30.0, unreachable_cooldown_s: float = 5.0) -> Iterator[BaseCheckpointSaver[Any]]:
    """Open a synchronous saver for ``database``; closes it on exit.

    Args:
        database: the validated ``database:`` block.
        create: create a missing SQLite file and run ``setup()`` (tables);
            otherwise a missing SQLite file is a :class:`ConfigError`.
        pool_size: maximum Postgres connections in the pool (count).
        timeout: seconds a Postgres query waits for a pooled connection before
            ``psycopg_pool.PoolTimeout`` (also how long an unreachable server
            makes a caller wait).
        unreachable_cooldown_s: after a Postgres outage is seen, seconds callers
            get :class:`deerflow.storage.pool.ServerUnreachable` (a ``PoolTimeout``) at once
            instead of waiting ``timeout`` each (:class:`deerflow.storage.pool.FailFastConnectionPool`).

    Yields:
        ``InMemorySaver``, ``SqliteSaver`` or ``PostgresSaver``. A SQLite file
        this process may only read is opened for reading when it holds
        LangGraph's tables (:func:`_setup_sqlite`). The Postgres
        pool never lends a session the server ended (:mod:`deerflow.storage.pool`), so
        the saver outlives a server restart without failing the calls that follow it.

    Raises:
        ConfigError: the SQLite file is missing and ``create`` is false.
        psycopg.OperationalError: Postgres is unreachable (``PoolTimeout`` after ``timeout``).
    """
    if database.backend == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    if database.backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = _sqlite_connection(database, create=create)
        try:
            saver = SqliteSaver(conn)
            _setup_sqlite(saver, conn)
            yield saver
        finally:
            conn.close()
        return
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import DictRow

    # A pooled session ended by a server restart is replaced when lent, instead of failing the next
    # request (deerflow.storage.pool.check_if_told: no round trip for a healthy connection).
    # connection_class names the row type for the checker (postgres_connect_kwargs sets row_factory=dict_row).
    pool: FailFastConnectionPool[Connection[DictRow]] = FailFastConnectionPool(
        database.postgres_url or "", connection_class=Connection[DictRow], min_size=1, max_size=pool_size,
        timeout=timeout,
        kwargs=postgres_connect_kwargs(database), open=True, cooldown_s=unreachable_cooldown_s,
    )
    try:
        pg_saver = PostgresSaver(pool)
        if create:
            pg_saver.setup()
        yield pg_saver
    finally:
        pool.close()


@asynccontextmanager
async def open_async_checkpointer(database: DatabaseConfig, *, create: bool = False,
                                  pool_size: int = 4) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Async twin of :func:`open_checkpointer` (``AsyncSqliteSaver`` / ``AsyncPostgresSaver``).

    Args and errors as for :func:`open_checkpointer`; ``create`` also creates
    a missing ``sqlite_dir``. The ``memory`` backend yields a new, empty
    ``InMemorySaver`` (it shares nothing with a sync one).
    """
    if database.backend == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    if database.backend == "sqlite":
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = _require_sqlite_file(database, create=create)
        conn = await aiosqlite.connect(str(path), timeout=30)
        try:
            saver = AsyncSqliteSaver(conn)
            await saver.setup()
            yield saver
        finally:
            await conn.close()
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import DictRow
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        database.postgres_url or "", connection_class=AsyncConnection[DictRow], min_size=1, max_size=pool_size,
        kwargs=postgres_connect_kwargs(database), open=False, check=AsyncConnectionPool.check_connection,
    )
    await pool.open()
    try:
        apg_saver = AsyncPostgresSaver(pool)
        if create:
            await apg_saver.setup()
        yield apg_saver
    finally:
        await pool.close()
