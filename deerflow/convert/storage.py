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
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.savers import postgres_connect_kwargs, sqlite_checkpoint_path
from deerflow.sqlread import Tx

__all__ = ["ConversionSession", "open_session"]

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

    ``query`` and ``execute`` (``?`` placeholders on both dialects) come from
    :class:`deerflow.sqlread.Tx`.

    Attributes:
        dialect: ``"sqlite"`` or ``"postgres"``.
        saver: ``SqliteSaver`` or ``PostgresSaver`` on the session's connection.
    """

    def __init__(self, dialect: str, conn: Any, saver: Any):
        super().__init__(dialect, conn)
        self.saver = saver

    def ensure_backup_tables(self) -> None:
        """Create this package's backup tables if missing (inside the transaction)."""
        for ddl in _SQLITE_DDL if self.dialect == "sqlite" else _POSTGRES_DDL:
            self.conn.execute(ddl)

    def lock_thread(self, thread_id: str) -> None:
        """Serialize conversions of one thread (Postgres advisory lock; SQLite already holds the write lock)."""
        if self.dialect == "postgres":
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("dfa.convert:" + thread_id,))

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
        table = "writes" if self.dialect == "sqlite" else "checkpoint_writes"
        rows = self.query(
            f"SELECT DISTINCT checkpoint_ns, checkpoint_id, task_id, task_path FROM {table} "
            "WHERE thread_id = ? AND channel = 'messages'", [thread_id])
        return {(r["checkpoint_ns"], r["checkpoint_id"], r["task_id"]): r["task_path"] for r in rows}

    def messages_blob_sizes(self, thread_id: str) -> dict[tuple[str, str], int]:
        """``{(checkpoint_ns, version): bytes}`` of the thread's ``messages`` blobs (Postgres; ``{}`` on SQLite)."""
        if self.dialect == "sqlite":
            return {}
        rows = self.query("SELECT checkpoint_ns, version, COALESCE(length(blob), 0) AS b FROM checkpoint_blobs "
                          "WHERE thread_id = ? AND channel = 'messages'", [thread_id])
        return {(r["checkpoint_ns"], r["version"]): int(r["b"]) for r in rows}

    def checkpoint_row_sizes(self, thread_id: str) -> dict[tuple[str, str], int]:
        """``{(checkpoint_ns, checkpoint_id): bytes}`` of each ``checkpoints`` row (checkpoint + metadata)."""
        size = ("LENGTH(checkpoint) + LENGTH(metadata)" if self.dialect == "sqlite"
                else "pg_column_size(checkpoint) + pg_column_size(metadata)")
        rows = self.query(f"SELECT checkpoint_ns, checkpoint_id, {size} AS b FROM checkpoints WHERE thread_id = ?",
                          [thread_id])
        return {(r["checkpoint_ns"], r["checkpoint_id"]): int(r["b"] or 0) for r in rows}

    def stored_bytes(self, thread_id: str) -> int:
        """Bytes the thread occupies in LangGraph's tables (checkpoints, blobs, writes)."""
        if self.dialect == "sqlite":
            a = self.query("SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) AS b FROM checkpoints "
                           "WHERE thread_id = ?", [thread_id])[0]["b"]
            b = self.query("SELECT COALESCE(SUM(LENGTH(value)), 0) AS b FROM writes WHERE thread_id = ?",
                           [thread_id])[0]["b"]
            return int(a) + int(b)
        a = self.query("SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) AS b "
                       "FROM checkpoints WHERE thread_id = ?", [thread_id])[0]["b"]
        b = self.query("SELECT COALESCE(SUM(COALESCE(length(blob), 0)), 0) AS b FROM checkpoint_blobs "
                       "WHERE thread_id = ?", [thread_id])[0]["b"]
        c = self.query("SELECT COALESCE(SUM(COALESCE(length(blob), 0)), 0) AS b FROM checkpoint_writes "
                       "WHERE thread_id = ?", [thread_id])[0]["b"]
        return int(a) + int(b) + int(c)

    def commit(self) -> None:
        """Commit the session's transaction."""
        if self.dialect == "sqlite":
            self.conn.really_commit()
        else:
            self.conn.commit()

    def rollback(self) -> None:
        """Roll the session's transaction back."""
        if self.dialect == "sqlite":
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        else:
            self.conn.rollback()


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
    was called. Raises ``ValueError`` for the memory backend (nothing persists).
    The SQLite saver's ``setup()`` runs first, outside the transaction, and may
    migrate an older file (LangGraph's own migration, e.g. ``writes.task_path``).
    """
    if database.backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = sqlite_checkpoint_path(database)
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=60,
                               check_same_thread=False, factory=_NoCommitConnection)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            session = ConversionSession("sqlite", conn, saver)
            try:
                yield session
            finally:
                session.rollback()
        finally:
            conn.close()
        return
    if database.backend == "postgres":
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        kwargs = postgres_connect_kwargs(database)
        kwargs["autocommit"] = False
        conn = psycopg.connect(database.postgres_url, **kwargs)
        if not write:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
        try:
            saver = PostgresSaver(conn)
            session = ConversionSession("postgres", conn, saver)
            try:
                yield session
            finally:
                if not conn.closed:
                    conn.rollback()
        finally:
            conn.close()
        return
    raise ValueError("conversion needs a persistent backend (sqlite or postgres), not 'memory'")
