"""The summary's own tables and indexes (append-only migrations), and what this connection may do with them.

Tables live in the checkpoint database next to LangGraph's (whose meaning is
unchanged; ``checkpoints`` only gains the ``checkpoint_id`` index the
watermark scan needs). The dashboard's Django database cannot hold them: the
refresh aggregates LangGraph's rows in the same SQL statement that upserts
the summary, and ``deerflow`` never imports Django.

Access (:func:`access`), cached per saver object:

``"write"``
    the tables exist (created here if need be) and may be refreshed;
``"read"``
    they exist and are readable but this role may not write them (a
    read-only browsing role granted ``SELECT`` on them): read, never refresh;
``"none"``
    they cannot be used (missing and not creatable, or not readable):
    callers aggregate LangGraph's tables live instead.
"""

from __future__ import annotations

import logging
import sqlite3
import time
import weakref
from typing import TYPE_CHECKING, Any

from deerflow.errors import StoragePermissionError, StorageQueryError
from deerflow.storage.dialect import Dialect
from deerflow.storage.driver_errors import driver_error
from deerflow.storage.sqlread import Tx, reader_for, table_exists

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["ACCESS_TTL_S", "MIGRATIONS", "OPTIONAL_STEPS", "SUMMARY_COLUMNS", "access", "ensure_schema",
           "forget", "is_denied", "is_summary_table_missing"]

log = logging.getLogger(__name__)

SUMMARY_COLUMNS = (
    "thread_id, checkpoint_count, last_checkpoint_id, head_checkpoint_id, marker_count, counters_count, "
    "bare_count, head_marker, head_counters, mode, mode_evidence, thread_class, replay_depth, "
    "bytes_checkpoints, bytes_blobs, bytes_writes, bytes_total"
)
_SORT_INDEXES = [("updated", "last_checkpoint_id"), ("count", "checkpoint_count"), ("bytes", "bytes_total")]
#: Seconds a "read"/"none" answer of :func:`access` is trusted before probing again.
ACCESS_TTL_S = 60.0


def _migrations(dialect: Dialect) -> list[str]:
    big, flag, concurrently = dialect.bigint, dialect.smallint, dialect.concurrently
    steps = [
        "CREATE TABLE IF NOT EXISTS dfa_summary_migrations (v INTEGER PRIMARY KEY)",
        f"""CREATE TABLE IF NOT EXISTS dfa_thread_summary (
            thread_id TEXT PRIMARY KEY, checkpoint_count {big} NOT NULL, last_checkpoint_id TEXT NOT NULL,
            head_checkpoint_id TEXT, marker_count {big} NOT NULL, counters_count {big} NOT NULL,
            bare_count {big} NOT NULL, head_marker {flag} NOT NULL, head_counters {flag} NOT NULL,
            mode TEXT NOT NULL, mode_evidence TEXT, thread_class TEXT NOT NULL, replay_depth {big},
            bytes_checkpoints {big} NOT NULL, bytes_blobs {big} NOT NULL, bytes_writes {big} NOT NULL,
            bytes_total {big} NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS dfa_summary_state (
            id INTEGER PRIMARY KEY CHECK (id = 1), watermark TEXT, backups_seen TEXT,
            restored_seen INTEGER NOT NULL DEFAULT 0, full_refresh_at TEXT, refreshed_at TEXT)""",
        "INSERT INTO dfa_summary_state (id) VALUES (1) ON CONFLICT (id) DO NOTHING",
    ]
    # Keyset pages: (sort key, thread_id) descending, alone and under each filter.
    for name, column in _SORT_INDEXES:
        steps.append(f"CREATE INDEX IF NOT EXISTS dfa_ts_{name}_idx ON dfa_thread_summary ({column}, thread_id)")
        for flt in ("mode", "thread_class"):
            steps.append(f"CREATE INDEX IF NOT EXISTS dfa_ts_{flt}_{name}_idx "
                         f"ON dfa_thread_summary ({flt}, {column}, thread_id)")
    # The watermark scan over LangGraph's table: an index only (needs the table's owner; optional).
    steps.append(f"CREATE INDEX {concurrently}IF NOT EXISTS dfa_checkpoints_checkpoint_id_idx "
                 "ON checkpoints (checkpoint_id)")
    # Cadence facts per thread (deerflow.inventory.summary.cadences), filled by the next full refresh.
    steps.append(f"""CREATE TABLE IF NOT EXISTS dfa_thread_cadences (
        thread_id TEXT NOT NULL, kind TEXT NOT NULL, cadence {big} NOT NULL, snapshots {big} NOT NULL,
        min_supersteps {big}, PRIMARY KEY (thread_id, kind, cadence))""")
    steps.append("CREATE INDEX IF NOT EXISTS dfa_tc_kind_cadence_idx ON dfa_thread_cadences (kind, cadence, thread_id)")
    steps.append("UPDATE dfa_summary_state SET watermark = NULL WHERE id = 1")  # rebuild every thread's facts
    # The count check (deerflow.inventory.summary.refresh): checkpoints at or below the watermark the summary
    # does not count (NULL: never checked), and when it last compared.
    exists = dialect.add_column_if_not_exists
    steps.append(f"ALTER TABLE dfa_summary_state ADD COLUMN {exists}missing {big}")
    steps.append(f"ALTER TABLE dfa_summary_state ADD COLUMN {exists}verified_at TEXT")
    # Write facts per thread and id bucket (deerflow.inventory.summary.writes), filled by the next full refresh.
    steps.append(f"""CREATE TABLE IF NOT EXISTS dfa_thread_writes (
        thread_id TEXT NOT NULL, bucket TEXT NOT NULL, checkpoints {big} NOT NULL, marked {big} NOT NULL,
        counters_only {big} NOT NULL, PRIMARY KEY (thread_id, bucket))""")
    steps.append("CREATE INDEX IF NOT EXISTS dfa_tw_bucket_idx ON dfa_thread_writes (bucket)")
    steps.append(f"""CREATE TABLE IF NOT EXISTS dfa_thread_write_snapshots (
        thread_id TEXT NOT NULL, bucket TEXT NOT NULL, cadence {big} NOT NULL, supersteps {big} NOT NULL,
        snapshots {big} NOT NULL, PRIMARY KEY (thread_id, bucket, cadence, supersteps))""")
    steps.append("CREATE INDEX IF NOT EXISTS dfa_tws_bucket_idx ON dfa_thread_write_snapshots (bucket)")
    steps.append("UPDATE dfa_summary_state SET watermark = NULL WHERE id = 1")  # rebuild every thread's facts
    # Bumped by every transaction that rewrites summary rows (deerflow.inventory.summary.rows.recompute, a full
    # refresh): readers cache what they derive from the summary under it (the audit's aggregates).
    steps.append(f"ALTER TABLE dfa_summary_state ADD COLUMN {exists}version {big} NOT NULL DEFAULT 0")
    return steps


#: Migrations per dialect; the position is the version (LangGraph's convention). Never edit, only append.
MIGRATIONS = {dialect: _migrations(dialect) for dialect in Dialect}
#: Versions whose failure for lack of privilege is logged and retried later instead of raised
#: (the index on LangGraph's ``checkpoints``, which needs the table's owner).
OPTIONAL_STEPS = frozenset({MIGRATIONS[Dialect.POSTGRES].index(next(
    s for s in MIGRATIONS[Dialect.POSTGRES] if "dfa_checkpoints_checkpoint_id_idx" in s))})
_READY: weakref.WeakSet[Any] = weakref.WeakSet()
_ACCESS: weakref.WeakKeyDictionary[Any, tuple[str, float]] = weakref.WeakKeyDictionary()
_MIGRATE_LOCK = "dfa.summary.migrate"


def is_denied(exc: BaseException) -> bool:
    """True for "this role or file may not do that" errors (privileges, read-only database or replica).

    ``exc`` may be the driver's error or its :class:`deerflow.errors.StorageError`.
    """
    if isinstance(exc, StoragePermissionError):
        return True
    exc = driver_error(exc)
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "readonly" in text or "read-only" in text or "unable to open" in text
    try:
        from psycopg import errors
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return False
    return isinstance(exc, (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction))


def is_summary_table_missing(exc: BaseException) -> bool:
    """True when ``exc`` says one of this package's ``dfa_*`` tables does not exist (dropped under a process).

    ``exc`` may be the driver's error or its :class:`deerflow.errors.StorageError`.
    """
    exc = driver_error(exc)
    if isinstance(exc, sqlite3.OperationalError):
        return "no such table: dfa_" in str(exc)
    try:
        from psycopg import errors
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return False
    return isinstance(exc, errors.UndefinedTable) and '"dfa_' in str(exc)


def forget(saver: BaseCheckpointSaver[Any]) -> None:
    """Forget what this process knows of ``saver``'s summary tables, so the next use migrates and probes again.

    For tables dropped under a running process (an operator's cleanup, a
    restore of LangGraph's tables alone): :func:`ensure_schema` recreates them.
    """
    _READY.discard(saver)
    _ACCESS.pop(saver, None)


def ensure_schema(saver: BaseCheckpointSaver[Any]) -> None:
    """Apply every missing migration (idempotent; once per saver object per process).

    Postgres serializes concurrent migrators with a session advisory lock and
    builds the ``checkpoints`` index ``CONCURRENTLY`` when the connection is in
    autocommit (the dashboard's pool is). An optional step this role may not
    run (the index on LangGraph's table needs its owner) is skipped and retried
    by the next process.

    Raises:
        psycopg.Error / sqlite3.Error: e.g. a denial (see :func:`is_denied`).
    """
    if saver in _READY:
        return
    reader = reader_for(saver)
    if reader.dialect is Dialect.SQLITE:  # one write transaction (BEGIN IMMEDIATE)
        with reader.transaction() as tx:
            _apply(tx, MIGRATIONS[reader.dialect])
    else:
        with reader.autocommit() as auto:
            if auto is None:
                with reader.transaction() as tx:
                    _apply(tx, [s.replace("CONCURRENTLY ", "") for s in MIGRATIONS[Dialect.POSTGRES]])
            else:
                auto.query("SELECT pg_advisory_lock(hashtext(?)) AS locked", [_MIGRATE_LOCK])
                try:
                    _apply(auto, MIGRATIONS[Dialect.POSTGRES])
                finally:
                    auto.query("SELECT pg_advisory_unlock(hashtext(?)) AS unlocked", [_MIGRATE_LOCK])
    _READY.add(saver)


def _apply(tx: Tx, steps: list[str]) -> None:
    tx.execute(steps[0])
    done = {r["v"] for r in tx.query("SELECT v FROM dfa_summary_migrations")}
    for version, step in enumerate(steps):
        if version in done:
            continue
        if version in OPTIONAL_STEPS and tx.dialect is Dialect.POSTGRES:
            try:
                if tx.conn.autocommit:  # CONCURRENTLY: no transaction block, and a failure poisons nothing
                    tx.execute(step)
                else:
                    with tx.conn.transaction():  # a savepoint keeps the outer transaction usable
                        tx.execute(step)
            except Exception as exc:
                if not is_denied(exc):
                    raise
                log.warning("summary: skipped optional migration %s (%s); the refresh scans without it", version, exc)
                continue
        else:
            try:
                tx.execute(step)
            except StorageQueryError as exc:
                # SQLite has no ADD COLUMN IF NOT EXISTS: a column already there means this step is done.
                if "duplicate column name" not in str(exc):
                    raise
        tx.execute("INSERT INTO dfa_summary_migrations (v) VALUES (?)", [version])


def _probe(saver: BaseCheckpointSaver[Any]) -> str:
    """What the tables allow without trying to create them (see the module docstring)."""
    reader = reader_for(saver)
    if not (table_exists(reader, "dfa_thread_summary") and table_exists(reader, "dfa_summary_state")):
        return "none"
    if not reader.dialect.table_privileges:
        return "read"
    row = reader.query(
        "SELECT has_table_privilege('dfa_thread_summary', 'SELECT') "
        "AND has_table_privilege('dfa_summary_state', 'SELECT') AS r, "
        "has_table_privilege('dfa_thread_summary', 'INSERT') AND has_table_privilege('dfa_thread_summary', 'UPDATE') "
        "AND has_table_privilege('dfa_thread_summary', 'DELETE') "
        "AND has_table_privilege('dfa_summary_state', 'UPDATE') AS w")[0]
    return "write" if row["w"] and row["r"] else ("read" if row["r"] else "none")


def access(saver: BaseCheckpointSaver[Any]) -> str:
    """``"write"``, ``"read"`` or ``"none"`` for this saver's role (see the module docstring).

    Creates the tables when it may. A ``"write"`` answer is kept for the
    process's life; the others are probed again after :data:`ACCESS_TTL_S`
    (a privileged process may create or grant the tables meanwhile).
    """
    cached = _ACCESS.get(saver)
    if cached and (cached[0] == "write" or time.monotonic() - cached[1] < ACCESS_TTL_S):
        return cached[0]
    try:
        ensure_schema(saver)
        # SQLite has no per-table privileges: migrating took the write lock, so it may write.
        answer = _probe(saver) if reader_for(saver).dialect.table_privileges else "write"
    except Exception as exc:
        if not is_denied(exc):
            raise
        answer = _probe(saver)
        if answer == "write":
            answer = "read"  # the tables are grantable, but this process could not finish migrating them
    _ACCESS[saver] = (answer, time.monotonic())
    return answer
