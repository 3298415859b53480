"""Can this process's checkpoint database role write? Asked before a job that writes is created.

A conversion (or a revert) on a role that may only read used to fail
thread by thread with ``InsufficientPrivilege … retry the job``; retrying
could never help. :func:`check_can_write` refuses the job up front with the
privileges it needs.

* Postgres: ``INSERT, UPDATE, DELETE`` on LangGraph's ``checkpoints``,
  ``checkpoint_blobs`` and ``checkpoint_writes`` (PostgreSQL's
  ``has_table_privilege``), and on the backup tables, or ``CREATE`` on the
  schema while they do not exist yet (``has_schema_privilege``); and, when DeerFlow's ``runs`` table is
  there, the same on it (every writing job inserts, renews and deletes its ``checkpoint_write``
  reservation there: :mod:`dashboard.jobs.reservations`).
* SQLite: the file and its directory must be writable by this process
  (``os.access``; SQLite writes its journal beside the file).
"""

from __future__ import annotations

import os

from dashboard.errors.jobs import ReadOnlyDatabase
from deerflow.config import DatabaseConfig
from deerflow.storage import Dialect, sqlite_checkpoint_path

__all__ = ["BACKUP_TABLES", "CHECKPOINT_TABLES", "check_can_write", "missing_privileges"]

CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
BACKUP_TABLES = ("dfa_backups", "dfa_backup_checkpoints", "dfa_backup_blobs")
#: DeerFlow's table the reservation writes (checked only where it exists).
DEERFLOW_TABLES = ("runs",)

_PRIVILEGES_SQL = """
SELECT t.name,
       to_regclass(t.name) IS NOT NULL AS present,
       CASE WHEN to_regclass(t.name) IS NULL THEN NULL
            ELSE has_table_privilege(to_regclass(t.name), 'INSERT, UPDATE, DELETE') END AS writable,
       has_schema_privilege(current_schema(), 'CREATE') AS can_create,
       current_user AS role
FROM unnest(%s::text[]) AS t(name)
"""


def missing_privileges(database: DatabaseConfig) -> tuple[str, list[str]]:
    """``(who, missing)``: the role (or OS user) and what it lacks to convert; ``missing`` empty when nothing.

    Raises:
        psycopg.OperationalError: the Postgres server cannot be reached (an outage, described elsewhere).
    """
    if database.backend == "sqlite":
        path = sqlite_checkpoint_path(database)
        lacking = [str(p) for p in (path, path.parent) if p.exists() and not os.access(p, os.W_OK)]
        return f"OS user {os.getuid()}", [f"write access to {p}" for p in lacking]
    if database.backend != "postgres":
        return "", []
    with Dialect.POSTGRES.connect(database, connect_timeout=5) as conn:
        rows = conn.execute(_PRIVILEGES_SQL, [list(CHECKPOINT_TABLES + BACKUP_TABLES + DEERFLOW_TABLES)]).fetchall()
    missing = [f"INSERT, UPDATE, DELETE on {r['name']}" for r in rows if r["present"] and not r["writable"]]
    if any(not r["present"] for r in rows if r["name"] in BACKUP_TABLES) and not rows[0]["can_create"]:
        missing.append("CREATE on the schema (for the backup tables dfa_backup*)")
    return f"role {rows[0]['role']!r}", missing


def check_can_write(database: DatabaseConfig) -> None:
    """Refuse a writing job when the checkpoint database may only be read.

    Raises:
        ReadOnlyDatabase: the role or file lacks a privilege (409 ``checkpoint_database_read_only``).
    """
    who, missing = missing_privileges(database)
    if missing:
        raise ReadOnlyDatabase(f"The checkpoint database {who} may only read; conversions need "
                               f"{'; '.join(missing)}. No job was created.")
