"""Backups of converted or pruned threads: copy, list, restore (revert) and purge.

A conversion backup holds, byte for byte, the rows a conversion rewrites:
every ``checkpoints`` row of the thread and, on Postgres, every ``messages``
blob of the thread. A whole-thread backup (``whole_thread=True``, what
retention takes before it deletes) also holds every blob of the thread (all
channels, Postgres) and every writes row (``dfa_backup_writes``), and is
marked in ``dfa_backup_scopes`` so its restore puts back exactly those rows.
A backup is written in the job's own transaction, so a changed thread always
has its backup. The two newer tables are created ``IF NOT EXISTS``; older
backups (no scope row) restore as before.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.errors import DeerFlowError
from deerflow.storage.dialect import Dialect
from deerflow.storage.sessions import ConversionSession, open_session
from deerflow.storage.sqlread import table_exists

__all__ = ["BackupInfo", "BackupNotFoundError", "copy_to_backup", "list_backups", "purge_backup", "restore_rows"]
# ensure_whole_thread_tables is public for retention (deerflow.retention), not re-exported by deerflow.convert.

_CHECKPOINT_COLS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"
_BLOB_COLS = "thread_id, checkpoint_ns, channel, version, type, blob"
#: ``dfa_backup_writes`` mirrors the dialect's writes table (:attr:`Dialect.write_columns`).
_WHOLE_THREAD_DDL = {
    Dialect.SQLITE: [
        """CREATE TABLE IF NOT EXISTS dfa_backup_writes (
            backup_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL,
            type TEXT, value BLOB, task_path TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (backup_id, checkpoint_ns, checkpoint_id, task_id, idx))""",
        "CREATE TABLE IF NOT EXISTS dfa_backup_scopes (backup_id TEXT PRIMARY KEY, scope TEXT NOT NULL)",
    ],
    Dialect.POSTGRES: [
        """CREATE TABLE IF NOT EXISTS dfa_backup_writes (
            backup_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, task_path TEXT NOT NULL DEFAULT '',
            idx INTEGER NOT NULL, channel TEXT NOT NULL, type TEXT, blob BYTEA NOT NULL,
            PRIMARY KEY (backup_id, checkpoint_ns, checkpoint_id, task_id, idx))""",
        "CREATE TABLE IF NOT EXISTS dfa_backup_scopes (backup_id TEXT PRIMARY KEY, scope TEXT NOT NULL)",
    ],
}


class BackupNotFoundError(DeerFlowError, LookupError):
    """No active backup with this id (never made, already restored, or purged)."""


class BackupAlreadyPurgedError(BackupNotFoundError):
    """The backup exists but was purged: its rows are gone (purging it again would report a purge that
    did not happen)."""


@dataclass(frozen=True)
class BackupInfo:
    """One backup: which thread, when, how many rows and bytes (count, bytes), and its status."""

    backup_id: str
    thread_id: str
    created_at: str
    checkpoint_rows: int
    blob_rows: int
    bytes: int
    status: str
    note: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        return asdict(self)


def _size_expr(session: ConversionSession) -> str:
    return f"COALESCE(SUM({session.dialect.checkpoint_bytes(None)}), 0)"


def ensure_whole_thread_tables(session: ConversionSession) -> None:
    """Create ``dfa_backup_writes`` and ``dfa_backup_scopes`` if missing (inside the transaction)."""
    session.ensure_backup_tables()
    session.create_tables(_WHOLE_THREAD_DDL[session.dialect])


def _scope(session: ConversionSession, backup_id: str) -> str:
    """``"thread"`` for a whole-thread backup, ``"conversion"`` otherwise (also before the tables exist)."""
    if not table_exists(session, "dfa_backup_scopes"):
        return "conversion"
    rows = session.query("SELECT scope FROM dfa_backup_scopes WHERE backup_id = ?", [backup_id])
    return rows[0]["scope"] if rows else "conversion"


def copy_to_backup(session: ConversionSession, backup_id: str, thread_id: str, *, note: str = "",
                   whole_thread: bool = False, move_messages: tuple[str, list[str]] | None = None) -> BackupInfo:
    """Copy the thread's rows into the backup tables (inside the session's transaction).

    Args:
        session: the open session (its transaction holds the copy).
        backup_id: the new backup's id.
        thread_id: the thread.
        note: stored with the backup (e.g. the job id).
        whole_thread: also copy every blob (all channels; Postgres) and every
            writes row, so :func:`restore_rows` can put the whole thread back
            byte for byte after rows were deleted (retention).
        move_messages: ``(checkpoint_ns, versions)``: Postgres, not with ``whole_thread``: the thread's
            ``messages`` blobs of that namespace at those versions are deleted by the statement that copies
            them (``DELETE ... RETURNING`` into the backup: one pass over their stored values instead of a copy
            and then a delete); the backup holds the same rows either way.

    Returns:
        The new backup's :class:`BackupInfo` (``blob_rows`` counts blobs and
        writes rows of a whole-thread backup; ``bytes`` their stored size).

    Raises:
        ValueError: ``move_messages`` with ``whole_thread``, or on SQLite (no blob table); nothing is written.
    """
    if move_messages is not None and (whole_thread or not session.dialect.has_blob_table):
        raise ValueError("move_messages moves the messages blobs of a conversion backup on Postgres: "
                         "not with whole_thread, nor on a backend without a blob table")
    session.ensure_backup_tables()
    if whole_thread:
        ensure_whole_thread_tables(session)
    rows = session.execute(
        f"INSERT INTO dfa_backup_checkpoints (backup_id, {_CHECKPOINT_COLS}) "
        f"SELECT ?, {_CHECKPOINT_COLS} FROM checkpoints WHERE thread_id = ?", [backup_id, thread_id])
    size = int(session.query(f"SELECT {_size_expr(session)} AS b FROM checkpoints WHERE thread_id = ?",
                             [thread_id])[0]["b"])
    blobs = 0
    if whole_thread:
        blobs, extra = _copy_whole_thread(session, backup_id, thread_id)
        size += extra
    elif session.dialect.has_blob_table:
        size += int(session.query(f"SELECT COALESCE(SUM({session.dialect.blob_bytes()}), 0) AS b "
                                  "FROM checkpoint_blobs WHERE thread_id = ? AND channel = 'messages'",
                                  [thread_id])[0]["b"])
        if move_messages is not None:
            ns, versions = move_messages
            blobs = session.execute(
                f"WITH moved AS (DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                f"AND channel = 'messages' AND version = ANY(?) RETURNING {_BLOB_COLS}) "
                f"INSERT INTO dfa_backup_blobs (backup_id, {_BLOB_COLS}) SELECT ?, {_BLOB_COLS} FROM moved",
                [thread_id, ns, versions, backup_id])
        blobs += session.execute(
            f"INSERT INTO dfa_backup_blobs (backup_id, {_BLOB_COLS}) SELECT ?, {_BLOB_COLS} FROM checkpoint_blobs "
            "WHERE thread_id = ? AND channel = 'messages'", [backup_id, thread_id])
    created = dt.datetime.now(dt.UTC).isoformat()
    session.execute(
        "INSERT INTO dfa_backups (backup_id, thread_id, created_at, checkpoint_rows, blob_rows, bytes, status, note) "
        "VALUES (?, ?, ?, ?, ?, ?, 'active', ?)", [backup_id, thread_id, created, rows, blobs, size, note])
    return BackupInfo(backup_id, thread_id, created, rows, blobs, size, "active", note)


def _copy_whole_thread(session: ConversionSession, backup_id: str, thread_id: str) -> tuple[int, int]:
    """Copy every blob and writes row of the thread; ``(rows copied, bytes)``."""
    cols, table = session.dialect.write_columns, session.dialect.writes_table
    copied = session.execute(f"INSERT INTO dfa_backup_writes (backup_id, {cols}) SELECT ?, {cols} FROM {table} "
                             "WHERE thread_id = ?", [backup_id, thread_id])
    size = int(session.query(f"SELECT COALESCE(SUM({session.dialect.write_bytes(None)}), 0) AS b FROM {table} "
                             "WHERE thread_id = ?", [thread_id])[0]["b"])
    if session.dialect.has_blob_table:
        copied += session.execute(f"INSERT INTO dfa_backup_blobs (backup_id, {_BLOB_COLS}) SELECT ?, {_BLOB_COLS} "
                                  "FROM checkpoint_blobs WHERE thread_id = ?", [backup_id, thread_id])
        size += int(session.query("SELECT COALESCE(SUM(COALESCE(length(blob), 0)), 0) AS b FROM checkpoint_blobs "
                                  "WHERE thread_id = ?", [thread_id])[0]["b"])
    session.execute("INSERT INTO dfa_backup_scopes (backup_id, scope) VALUES (?, 'thread')", [backup_id])
    return copied, size


def _restore_whole_thread(session: ConversionSession, info: BackupInfo) -> None:
    """Put a whole-thread backup back: its checkpoints, blobs and writes rows, byte for byte.

    Rows of checkpoints written after the backup (ids not in it) are kept,
    with the blobs they reference.
    """
    thread_id, backup_id = info.thread_id, info.backup_id
    in_backup = ("EXISTS (SELECT 1 FROM dfa_backup_checkpoints b WHERE b.backup_id = ? "
                 "AND b.checkpoint_ns = {t}.checkpoint_ns AND b.checkpoint_id = {t}.checkpoint_id)")
    table, cols = session.dialect.writes_table, session.dialect.write_columns
    session.execute(f"DELETE FROM {table} WHERE thread_id = ? AND ({in_backup.format(t=table)} OR EXISTS ("
                    "SELECT 1 FROM dfa_backup_writes w WHERE w.backup_id = ? "
                    f"AND w.checkpoint_ns = {table}.checkpoint_ns "
                    f"AND w.checkpoint_id = {table}.checkpoint_id))", [thread_id, backup_id, backup_id])
    if session.dialect.has_blob_table:
        # Blobs only the backed-up checkpoints' current rows reference (e.g. a rebased snapshot) go first.
        session.execute(
            "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND EXISTS (SELECT 1 FROM checkpoints c "
            "WHERE c.thread_id = checkpoint_blobs.thread_id AND c.checkpoint_ns = checkpoint_blobs.checkpoint_ns "
            "AND c.checkpoint -> 'channel_versions' ->> checkpoint_blobs.channel = checkpoint_blobs.version "
            f"AND {in_backup.format(t='c')}) AND NOT EXISTS (SELECT 1 FROM checkpoints c "
            "WHERE c.thread_id = checkpoint_blobs.thread_id AND c.checkpoint_ns = checkpoint_blobs.checkpoint_ns "
            "AND c.checkpoint -> 'channel_versions' ->> checkpoint_blobs.channel = checkpoint_blobs.version "
            f"AND NOT {in_backup.format(t='c')})", [thread_id, backup_id, backup_id])
    session.execute(f"DELETE FROM checkpoints WHERE thread_id = ? AND {in_backup.format(t='checkpoints')}",
                    [thread_id, backup_id])
    session.execute(f"INSERT INTO checkpoints ({_CHECKPOINT_COLS}) SELECT {_CHECKPOINT_COLS} "
                    "FROM dfa_backup_checkpoints WHERE backup_id = ?", [backup_id])
    session.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM dfa_backup_writes WHERE backup_id = ?",
                    [backup_id])
    if session.dialect.has_blob_table:
        session.execute(
            f"INSERT INTO checkpoint_blobs ({_BLOB_COLS}) SELECT {_BLOB_COLS} FROM dfa_backup_blobs "
            "WHERE backup_id = ? ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE "
            "SET type = EXCLUDED.type, blob = EXCLUDED.blob", [backup_id])


def _info(row: dict[str, Any]) -> BackupInfo:
    created = row["created_at"]
    return BackupInfo(row["backup_id"], row["thread_id"], created.isoformat() if hasattr(created, "isoformat")
                      else str(created), int(row["checkpoint_rows"]), int(row["blob_rows"]), int(row["bytes"]),
                      row["status"], row["note"])


def get_backup(session: ConversionSession, backup_id: str) -> BackupInfo:
    """The backup's record (any status).

    Raises:
        BackupNotFoundError: no such backup.
    """
    session.ensure_backup_tables()
    rows = session.query("SELECT * FROM dfa_backups WHERE backup_id = ?", [backup_id])
    if not rows:
        raise BackupNotFoundError(f"No backup {backup_id!r}.")
    return _info(rows[0])


def restore_rows(session: ConversionSession, backup_id: str) -> BackupInfo:
    """Put the backed-up rows back in place of the thread's current ones (inside the transaction).

    Checkpoints written after the conversion (ids not in the backup) are kept.

    Raises:
        BackupNotFoundError: no active backup with this id.
    """
    info = get_backup(session, backup_id)
    if info.status != "active":
        raise BackupNotFoundError(f"Backup {backup_id!r} is {info.status}, not active.")
    if _scope(session, backup_id) == "thread":
        _restore_whole_thread(session, info)
        session.execute("UPDATE dfa_backups SET status = 'restored' WHERE backup_id = ?", [backup_id])
        return info
    if session.dialect.has_blob_table:
        # Blobs the conversion wrote (including split versions) go first, while the converted rows name them.
        session.execute(
            "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND channel = 'messages' AND EXISTS ("
            "SELECT 1 FROM checkpoints c JOIN dfa_backup_checkpoints b ON b.backup_id = ? "
            "AND b.checkpoint_ns = c.checkpoint_ns AND b.checkpoint_id = c.checkpoint_id "
            "WHERE c.thread_id = checkpoint_blobs.thread_id AND c.checkpoint_ns = checkpoint_blobs.checkpoint_ns "
            "AND c.checkpoint -> 'channel_versions' ->> 'messages' = checkpoint_blobs.version)",
            [info.thread_id, backup_id])
    session.execute(
        "DELETE FROM checkpoints WHERE thread_id = ? AND EXISTS (SELECT 1 FROM dfa_backup_checkpoints b "
        "WHERE b.backup_id = ? AND b.checkpoint_ns = checkpoints.checkpoint_ns "
        "AND b.checkpoint_id = checkpoints.checkpoint_id)", [info.thread_id, backup_id])
    session.execute(f"INSERT INTO checkpoints ({_CHECKPOINT_COLS}) SELECT {_CHECKPOINT_COLS} "
                    "FROM dfa_backup_checkpoints WHERE backup_id = ?", [backup_id])
    if session.dialect.has_blob_table:
        session.execute(
            "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND channel = 'messages' AND EXISTS ("
            "SELECT 1 FROM dfa_backup_checkpoints b WHERE b.backup_id = ? "
            "AND b.checkpoint_ns = checkpoint_blobs.checkpoint_ns "
            "AND b.checkpoint -> 'channel_versions' ->> 'messages' = checkpoint_blobs.version)",
            [info.thread_id, backup_id])
        session.execute(
            f"INSERT INTO checkpoint_blobs ({_BLOB_COLS}) SELECT {_BLOB_COLS} FROM dfa_backup_blobs "
            "WHERE backup_id = ? ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE "
            "SET type = EXCLUDED.type, blob = EXCLUDED.blob", [backup_id])
    session.execute("UPDATE dfa_backups SET status = 'restored' WHERE backup_id = ?", [backup_id])
    return info


def list_backups(database: DatabaseConfig, thread_id: str | None = None) -> list[BackupInfo]:
    """Every backup (newest first), optionally of one thread."""
    with open_session(database) as session:
        session.ensure_backup_tables()
        if thread_id is None:
            rows = session.query("SELECT * FROM dfa_backups ORDER BY created_at DESC, backup_id DESC")
        else:
            rows = session.query("SELECT * FROM dfa_backups WHERE thread_id = ? "
                                 "ORDER BY created_at DESC, backup_id DESC", [thread_id])
        session.commit()
    return [_info(r) for r in rows]


def purge_backup(database: DatabaseConfig, backup_id: str) -> BackupInfo:
    """Delete a backup's rows and mark it purged; the converted thread is not touched.

    Raises:
        BackupNotFoundError: no such backup.
        BackupAlreadyPurgedError: the backup was purged before (nothing is deleted).
    """
    with open_session(database) as session:
        info = get_backup(session, backup_id)
        if info.status == "purged":
            raise BackupAlreadyPurgedError(
                f"Backup {backup_id!r} of thread {info.thread_id!r} was already purged: its rows are gone.")
        session.execute("DELETE FROM dfa_backup_checkpoints WHERE backup_id = ?", [backup_id])
        if session.dialect.has_blob_table:
            session.execute("DELETE FROM dfa_backup_blobs WHERE backup_id = ?", [backup_id])
        if table_exists(session, "dfa_backup_writes"):
            session.execute("DELETE FROM dfa_backup_writes WHERE backup_id = ?", [backup_id])
        session.execute("UPDATE dfa_backups SET status = 'purged' WHERE backup_id = ?", [backup_id])
        session.commit()
    return info
