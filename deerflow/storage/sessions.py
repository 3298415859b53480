"""Transactional access to a checkpoint database for conversion: one session per thread.

A :class:`ConversionSession` owns one database connection in one
transaction, and a LangGraph saver bound to that connection, so every read
and write of a conversion (the saver's own ``list``/``put`` and our backup
SQL) commits or rolls back together. A killed process leaves the thread
untouched: Postgres rolls back the open transaction when the connection
drops; SQLite rolls back its journal on next open.

Locks: Postgres takes ``pg_advisory_xact_lock`` on the thread id (two
workers never convert one thread at once); SQLite's ``BEGIN IMMEDIATE``
takes the database write lock for the whole transaction.

Backups live in the checkpoint database, in tables this package owns
(``dfa_backups``, ``dfa_backup_checkpoints``, ``dfa_backup_blobs``); LangGraph's
tables keep their meaning.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.storage.dialect import Dialect
from deerflow.storage.driver_errors import translated
from deerflow.storage.sqlread import Tx, table_exists

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["ConversionSession", "open_session", "open_snapshot_reader"]

_SQLITE_DDL = [
    """CREATE TABLE IF NOT EXISTS dfa_backups (
        backup_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, created_at TEXT NOT NULL,
        checkpoint_rows INTEGER NOT NULL, blob_rows INTEGER NOT NULL, bytes INTEGER NOT NULL,
        status TEXT NOT NULL, note TEXT NOT NULL DEFAULT '')""",
    """CREATE TABLE IF NOT EXISTS dfa_backup_checkpoints (
        backup_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB,
        PRIMARY KEY (backup_id, checkpoint_ns, checkpoint_id))""",
]
_POSTGRES_DDL = [
    """CREATE TABLE IF NOT EXISTS dfa_backups (
        backup_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        checkpoint_rows INTEGER NOT NULL, blob_rows INTEGER NOT NULL, bytes BIGINT NOT NULL,
        status TEXT NOT NULL, note TEXT NOT NULL DEFAULT '')""",
    """CREATE TABLE IF NOT EXISTS dfa_backup_checkpoints (
        backup_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint JSONB NOT NULL,
        metadata JSONB NOT NULL DEFAULT '{}', PRIMARY KEY (backup_id, checkpoint_ns, checkpoint_id))""",
    """CREATE TABLE IF NOT EXISTS dfa_backup_blobs (
        backup_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, channel TEXT NOT NULL,
        version TEXT NOT NULL, type TEXT NOT NULL, blob BYTEA,
        PRIMARY KEY (backup_id, checkpoint_ns, channel, version))""",
]
#: This package's backup tables, per dialect (``dfa_backup_blobs`` only where blobs have their own table).
_BACKUP_DDL = {Dialect.SQLITE: _SQLITE_DDL, Dialect.POSTGRES: _POSTGRES_DDL}


class _NoCommitConnection(sqlite3.Connection):
    """A SQLite connection whose ``commit()`` is a no-op, so the saver cannot end our transaction."""

    def commit(self) -> None:  # noqa: D102 - see class docstring
        return None

    def really_commit(self) -> None:
        """End the transaction."""
        sqlite3.Connection.commit(self)
        if self.in_transaction:
            self.execute("COMMIT")


class ConversionSession(Tx):
    """One connection, one transaction, and a saver bound to it.

    ``query`` and ``execute`` (``?`` placeholders on both dialects, driver
    errors raised as :class:`deerflow.errors.StorageError`) and the SQL
    fragments come from :class:`deerflow.storage.sqlread.Tx`.

    Attributes:
        dialect: :class:`deerflow.storage.dialect.Dialect` (``"sqlite"`` or ``"postgres"``).
        saver: ``SqliteSaver`` or ``PostgresSaver`` on the session's connection.
    """

    def __init__(self, dialect: str, conn: Any, saver: BaseCheckpointSaver[Any]):
        super().__init__(dialect, conn)
        self.saver = saver

    def ensure_backup_tables(self) -> None:
        """Create this package's backup tables if missing (inside the transaction); see :meth:`create_tables`."""
        self.create_tables(_BACKUP_DDL[self.dialect])

    def create_tables(self, ddls: list[str]) -> None:
        """Run ``CREATE TABLE IF NOT EXISTS`` statements, serialized with any other creator.

        When a table is missing on Postgres, a transaction-level advisory lock
        (``dfa.backup_ddl``) is taken first: two transactions creating the same
        table at once would otherwise both insert its catalog rows, and the
        second fails with a unique violation on ``pg_type`` (seen with two
        thread tasks in flight on a fresh database). Once the tables exist no
        lock is taken. SQLite's ``BEGIN IMMEDIATE`` already serializes writers.
        """
        names = [ddl.split("EXISTS", 1)[1].split("(", 1)[0].strip() for ddl in ddls]
        if all(table_exists(self, name) for name in names):
            return
        with translated():
            self.dialect.lock_thread(self.conn, "dfa.backup_ddl")
        for ddl in ddls:
            self.execute(ddl)

    def lock_thread(self, thread_id: str) -> None:
        """Serialize conversions of one thread (Postgres advisory lock; SQLite already holds the write lock)."""
        with translated():
            self.dialect.lock_thread(self.conn, "dfa.convert:" + thread_id)

    def watermark(self, thread_id: str) -> tuple[int, str | None]:
        """``(checkpoint count, newest checkpoint id)`` of the thread as committed now."""
        row = self.query(
            "SELECT COUNT(*) AS n, MAX(checkpoint_id) AS newest FROM checkpoints WHERE thread_id = ?", [thread_id]
        )[0]
        return int(row["n"]), row["newest"]

    def namespaces(self, thread_id: str) -> list[str]:
        """The thread's ``checkpoint_ns`` values, root first."""
        rows = self.query("SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", [thread_id])
        return sorted((r["checkpoint_ns"] for r in rows), key=lambda ns: (ns != "", ns))

    def task_paths(self, thread_id: str) -> dict[tuple[str, str, str], str]:
        """``{(checkpoint_ns, checkpoint_id, task_id): task_path}`` for the tasks that wrote ``messages``.

        ``task_path`` is a property of the task (every row of one task carries
        the same one); ``''`` where the saver stored none.
        """
        rows = self.query(
            f"SELECT DISTINCT checkpoint_ns, checkpoint_id, task_id, task_path FROM {self.writes_table} "
            "WHERE thread_id = ? AND channel = 'messages'", [thread_id])
        return {(r["checkpoint_ns"], r["checkpoint_id"], r["task_id"]): r["task_path"] for r in rows}

    def messages_blob_sizes(self, thread_id: str) -> dict[tuple[str, str], int]:
        """``{(checkpoint_ns, version): bytes}`` of the thread's ``messages`` blobs (Postgres; ``{}`` on SQLite)."""
        if not self.dialect.has_blob_table:
            return {}
        rows = self.query(f"SELECT checkpoint_ns, version, {self.dialect.blob_bytes()} AS b FROM checkpoint_blobs "
                          "WHERE thread_id = ? AND channel = 'messages'", [thread_id])
        return {(r["checkpoint_ns"], r["version"]): int(r["b"]) for r in rows}

    def checkpoint_row_sizes(self, thread_id: str) -> dict[tuple[str, str], int]:
        """``{(checkpoint_ns, checkpoint_id): bytes}`` of each ``checkpoints`` row (checkpoint + metadata)."""
        rows = self.query(f"SELECT checkpoint_ns, checkpoint_id, {self.checkpoint_bytes(None)} AS b "
                          "FROM checkpoints WHERE thread_id = ?", [thread_id])
        return {(r["checkpoint_ns"], r["checkpoint_id"]): int(r["b"] or 0) for r in rows}

    def stored_bytes(self, thread_id: str) -> int:
        """Bytes the thread occupies in LangGraph's tables (checkpoints, blobs, writes)."""
        d = self.dialect
        parts = [f"SELECT COALESCE(SUM({d.checkpoint_bytes(None)}), 0) AS b FROM checkpoints WHERE thread_id = ?",
                 f"SELECT COALESCE(SUM({d.write_bytes(None)}), 0) AS b FROM {d.writes_table} WHERE thread_id = ?"]
        if d.has_blob_table:
            parts.append(f"SELECT COALESCE(SUM({d.blob_bytes()}), 0) AS b FROM checkpoint_blobs WHERE thread_id = ?")
        return sum(int(self.query(sql, [thread_id])[0]["b"]) for sql in parts)

    def commit(self) -> None:
        """Commit the session's transaction.

        Raises:
            StorageError: the commit failed (the transaction is rolled back by the database).
        """
        with translated():
            if isinstance(self.conn, _NoCommitConnection):
                self.conn.really_commit()
            else:
                self.conn.commit()

    def rollback(self) -> None:
        """Roll the session's transaction back."""
        with translated():
            if isinstance(self.conn, _NoCommitConnection):
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
            else:
                self.conn.rollback()


def _bound_saver(dialect: Dialect, conn: Any) -> BaseCheckpointSaver[Any]:
    """LangGraph's saver of ``dialect`` on ``conn`` (SQLite: its tables set up; Postgres: already there).

    The savers are imported here, where a session opens: a process that never rewrites never imports them.
    """
    if dialect is Dialect.SQLITE:
        from langgraph.checkpoint.sqlite import SqliteSaver

        sqlite_saver = SqliteSaver(conn)
        sqlite_saver.setup()
        return sqlite_saver
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver(conn)


@contextmanager
def open_session(database: DatabaseConfig, *, write: bool = True) -> Iterator[ConversionSession]:
    """Open a connection, begin a transaction, and bind a saver to it.

    Args:
        database: the checkpoint database (sqlite or postgres).
        write: ``True`` for a conversion (SQLite: ``BEGIN IMMEDIATE``, the
            database write lock for the whole transaction). ``False`` for an
            analysis that writes nothing (a dry run): one consistent snapshot
            without blocking DeerFlow's writers (SQLite: a deferred read
            transaction; Postgres: ``REPEATABLE READ``, read only).

    The transaction is rolled back on exit unless :meth:`ConversionSession.commit`
    was called. The SQLite saver's ``setup()`` runs first, outside the
    transaction, and may migrate an older file (LangGraph's own migration,
    e.g. ``writes.task_path``).

    Raises:
        ConfigError: the memory backend (nothing persists); also a ``ValueError``.
        StorageError: connecting, ``setup()`` or beginning failed (e.g.
            :class:`~deerflow.errors.StorageUnavailableError`: locked, unreachable).
    """
    dialect = Dialect.of_database(database, purpose="conversion")
    with translated():
        conn = (dialect.connect(database, timeout=60, factory=_NoCommitConnection) if dialect is Dialect.SQLITE
                else dialect.connect(database, autocommit=False))
    try:
        with translated():
            saver = _bound_saver(dialect, conn)
            dialect.begin(conn, write=write)
        session = ConversionSession(dialect, conn, saver)
        try:
            yield session
        finally:
            if not getattr(conn, "closed", False):
                session.rollback()
    finally:
        conn.close()


@contextmanager
def open_snapshot_reader(database: DatabaseConfig, session: ConversionSession) -> Iterator[ConversionSession]:
    """A second, read-only session that sees what ``session``'s transaction sees now, on its own connection.

    Postgres: ``session`` exports its current snapshot (``pg_export_snapshot``)
    and a new connection reads in a ``REPEATABLE READ``, read-only transaction
    that imports it (``SET TRANSACTION SNAPSHOT``): every read through the
    reader sees the rows as they were when this was called, whatever
    ``session`` writes afterwards, and the server can run a statement of
    ``session`` and a read of the reader at the same time. Nothing is written
    through the reader; it is rolled back and closed on exit. SQLite (one
    writer, and reads see the writer's changes): ``session`` itself.

    Args:
        database: the checkpoint database ``session`` is connected to.
        session: the write session (its transaction must stay open while the reader is used).

    Yields:
        A :class:`ConversionSession` with its own saver (Postgres), or ``session`` (SQLite).

    Raises:
        StorageError: exporting, connecting or importing failed.
    """
    if session.dialect is not Dialect.POSTGRES:
        yield session
        return
    from psycopg import sql

    snapshot = session.query("SELECT pg_export_snapshot() AS snapshot")[0]["snapshot"]
    with translated():
        conn = session.dialect.connect(database, autocommit=False)
    try:
        with translated():
            session.dialect.begin(conn, write=False)
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
            reader = ConversionSession(session.dialect, conn, _bound_saver(session.dialect, conn))
        yield reader
    finally:
        conn.close()
