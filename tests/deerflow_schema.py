"""DeerFlow's own ``threads_meta`` and ``runs`` tables, created in a test's checkpoint database.

A live DeerFlow keeps its application tables in the same database as LangGraph's checkpoints (SQLite: the
same ``{sqlite_dir}/deerflow.db``; Postgres: the same database and ``search_path`` schema). This module
writes the DDL DeerFlow's SQLAlchemy models produce (``Base.metadata.create_all``, which its alembic
migrations keep in step with), so tests can stand a DeerFlow deployment's tables beside the real fixture:

* :func:`create_deerflow_tables` / :func:`drop_deerflow_tables`;
* :func:`insert_thread_meta` and :func:`insert_run`: one row each, with DeerFlow's column defaults.

The facts, from ``bytedance/deer-flow`` ``backend/packages/harness/deerflow/persistence/``:

* ``thread_meta/model.py`` (``ThreadMetaRow``) and ``migrations/versions/0001_baseline.py``: ``threads_meta``
  (``thread_id`` VARCHAR(64) primary key, ``assistant_id`` VARCHAR(128), ``user_id`` VARCHAR(64),
  ``display_name`` VARCHAR(256), ``status`` VARCHAR(20) NOT NULL (Python default ``"idle"``),
  ``metadata_json`` JSON NOT NULL, ``created_at``/``updated_at`` timestamp with time zone NOT NULL),
  indexes ``ix_threads_meta_assistant_id`` and ``ix_threads_meta_user_id``;
* ``run/model.py`` (``RunRow``) and migrations 0001, 0002 (``token_usage_by_model``), 0004 (``owner_worker_id``,
  ``lease_expires_at``, ``ix_runs_lease``, ``uq_runs_thread_active``), 0005 (``stop_reason``), 0008
  (``operation_kind`` NOT NULL server default ``'run'``), 0010 (``cancel_action``, ``cancel_requested_at``):
  ``runs``, with the partial unique index ``uq_runs_thread_active`` on ``thread_id`` where ``status IN
  ('pending', 'running')`` (at most one active run or reservation per thread).

Only ``operation_kind`` and ``token_usage_by_model`` have server defaults; every other default is applied by
SQLAlchemy in Python, so the columns are ``NOT NULL`` without ``DEFAULT`` and the insert helpers supply them.
SQLite stores ``DateTime(timezone=True)`` as SQLAlchemy does: ``YYYY-MM-DD HH:MM:SS.ffffff`` text in UTC.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.dialect import Dialect

__all__ = [
    "FIXTURE_META",
    "GONE_THREAD",
    "RUN_STATUSES",
    "THREAD_OPERATION_KINDS",
    "create_deerflow_tables",
    "deerflow_connection",
    "drop_deerflow_tables",
    "insert_run",
    "insert_thread_meta",
    "sqlite_timestamp",
    "stand_beside_fixture",
]

#: DeerFlow's ``RunStatus`` (``runtime/runs/schemas.py``).
RUN_STATUSES = ("pending", "running", "success", "error", "timeout", "interrupted")
#: DeerFlow's ``ThreadOperationKind`` (``runtime/runs/schemas.py``): what holds a thread's admission.
THREAD_OPERATION_KINDS = ("run", "checkpoint_write", "artifact_write", "delete")

# (name, type, NOT NULL, server default); types are SQLAlchemy's generic ones, rendered per dialect below.
_THREADS_META = (
    ("thread_id", "VARCHAR(64)", True, None),
    ("assistant_id", "VARCHAR(128)", False, None),
    ("user_id", "VARCHAR(64)", False, None),
    ("display_name", "VARCHAR(256)", False, None),
    ("status", "VARCHAR(20)", True, None),
    ("metadata_json", "JSON", True, None),
    ("created_at", "TIMESTAMPTZ", True, None),
    ("updated_at", "TIMESTAMPTZ", True, None),
)
_RUNS = (
    ("run_id", "VARCHAR(64)", True, None),
    ("thread_id", "VARCHAR(64)", True, None),
    ("assistant_id", "VARCHAR(128)", False, None),
    ("user_id", "VARCHAR(64)", False, None),
    ("status", "VARCHAR(20)", True, None),
    ("operation_kind", "VARCHAR(32)", True, "'run'"),
    ("idempotency_key", "VARCHAR(255)", False, None),
    ("model_name", "VARCHAR(128)", False, None),
    ("multitask_strategy", "VARCHAR(20)", True, None),
    ("metadata_json", "JSON", True, None),
    ("kwargs_json", "JSON", True, None),
    ("error", "TEXT", False, None),
    ("stop_reason", "VARCHAR(50)", False, None),
    ("message_count", "INTEGER", True, None),
    ("first_human_message", "TEXT", False, None),
    ("last_ai_message", "TEXT", False, None),
    ("total_input_tokens", "INTEGER", True, None),
    ("total_output_tokens", "INTEGER", True, None),
    ("total_tokens", "INTEGER", True, None),
    ("llm_call_count", "INTEGER", True, None),
    ("lead_agent_tokens", "INTEGER", True, None),
    ("subagent_tokens", "INTEGER", True, None),
    ("middleware_tokens", "INTEGER", True, None),
    ("token_usage_by_model", "JSON", True, "'{}'"),
    ("follow_up_to_run_id", "VARCHAR(64)", False, None),
    ("owner_worker_id", "VARCHAR(128)", False, None),
    ("lease_expires_at", "TIMESTAMPTZ", False, None),
    ("cancel_action", "VARCHAR(20)", False, None),
    ("cancel_requested_at", "TIMESTAMPTZ", False, None),
    ("created_at", "TIMESTAMPTZ", True, None),
    ("updated_at", "TIMESTAMPTZ", True, None),
)
_ACTIVE = "status IN ('pending', 'running')"
_INDEXES = (
    "CREATE INDEX ix_threads_meta_assistant_id ON threads_meta (assistant_id)",
    "CREATE INDEX ix_threads_meta_user_id ON threads_meta (user_id)",
    "CREATE INDEX ix_runs_thread_id ON runs (thread_id)",
    "CREATE INDEX ix_runs_user_id ON runs (user_id)",
    "CREATE INDEX ix_runs_thread_status ON runs (thread_id, status)",
    "CREATE INDEX ix_runs_lease ON runs (lease_expires_at)",
    "CREATE UNIQUE INDEX uq_runs_idempotency_key ON runs (idempotency_key)",
    f"CREATE UNIQUE INDEX uq_runs_thread_active ON runs (thread_id) WHERE {_ACTIVE}",
)


def _column_type(dialect: Dialect, generic: str) -> str:
    if generic == "TIMESTAMPTZ":  # SQLAlchemy DateTime(timezone=True)
        return "DATETIME" if dialect is Dialect.SQLITE else "TIMESTAMP WITH TIME ZONE"
    return generic


def _create_table(dialect: Dialect, name: str, columns: tuple[tuple[str, str, bool, str | None], ...],
                  key: str) -> str:
    lines = []
    for column, generic, not_null, default in columns:
        line = f"{column} {_column_type(dialect, generic)}"
        line += " NOT NULL" if not_null else ""
        line += f" DEFAULT {default}" if default else ""
        lines.append(line)
    lines.append(f"PRIMARY KEY ({key})")
    return f"CREATE TABLE {name} (\n    " + ",\n    ".join(lines) + "\n)"


@contextmanager
def deerflow_connection(database: DatabaseConfig) -> Iterator[Any]:
    """An autocommit connection to ``database`` (Postgres: on its ``postgres_schema``), closed on exit."""
    conn = Dialect.of_database(database).connect(database)
    try:
        yield conn
    finally:
        conn.close()


def create_deerflow_tables(database: DatabaseConfig) -> None:
    """Create DeerFlow's ``threads_meta`` and ``runs`` (with every index) in ``database``.

    Postgres: in ``database.postgres_schema`` when set (the schema is created if missing), else on the
    server's default search path (``public``).

    Raises:
        sqlite3.Error / psycopg.Error: the tables exist already, or the database refused the DDL.
    """
    dialect = Dialect.of_database(database)
    if dialect is Dialect.POSTGRES and database.postgres_schema:
        import psycopg

        with psycopg.connect(database.postgres_url or "", autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{database.postgres_schema}"')
    statements = (_create_table(dialect, "threads_meta", _THREADS_META, "thread_id"),
                  _create_table(dialect, "runs", _RUNS, "run_id"), *_INDEXES)
    with deerflow_connection(database) as conn:
        for statement in statements:
            conn.execute(statement)


def drop_deerflow_tables(database: DatabaseConfig) -> None:
    """Drop ``threads_meta`` and ``runs`` from ``database`` if they exist."""
    with deerflow_connection(database) as conn:
        conn.execute("DROP TABLE IF EXISTS runs")
        conn.execute("DROP TABLE IF EXISTS threads_meta")


def sqlite_timestamp(moment: datetime) -> str:
    """``moment`` as SQLAlchemy stores a ``DateTime`` on SQLite: UTC ``YYYY-MM-DD HH:MM:SS.ffffff``."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _bind(dialect: Dialect, value: Any) -> Any:
    if isinstance(value, datetime):
        return sqlite_timestamp(value) if dialect is Dialect.SQLITE else value
    if isinstance(value, dict):
        return json.dumps(value)
    return value


def _insert(database: DatabaseConfig, table: str, row: dict[str, Any]) -> None:
    dialect = Dialect.of_database(database)
    names = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    with deerflow_connection(database) as conn:
        conn.execute(dialect.sql(f"INSERT INTO {table} ({names}) VALUES ({marks})"),
                     [_bind(dialect, v) for v in row.values()])


def insert_thread_meta(database: DatabaseConfig, thread_id: str, *, user_id: str | None = None,
                       display_name: str | None = None, status: str = "idle", assistant_id: str | None = None,
                       metadata: dict[str, Any] | None = None, created_at: datetime | None = None,
                       updated_at: datetime | None = None) -> None:
    """Insert one ``threads_meta`` row as DeerFlow's ``ThreadMetaRepository.create`` does.

    Args:
        database: the database holding DeerFlow's tables (:func:`create_deerflow_tables`).
        thread_id: the LangGraph thread id.
        user_id: the owner (DeerFlow's user id), or ``None``.
        display_name: the title DeerFlow's UI shows, or ``None``.
        status: DeerFlow's thread status (``idle``, ``running``, ``error``, ``interrupted``).
        assistant_id: the assistant (graph) id, or ``None``.
        metadata: ``metadata_json`` (default ``{}``).
        created_at / updated_at: aware datetimes (default: now, UTC).

    Raises:
        sqlite3.IntegrityError / psycopg.errors.UniqueViolation: the thread already has a row.
    """
    now = datetime.now(UTC)
    _insert(database, "threads_meta", {
        "thread_id": thread_id, "assistant_id": assistant_id, "user_id": user_id, "display_name": display_name,
        "status": status, "metadata_json": metadata or {}, "created_at": created_at or now,
        "updated_at": updated_at or created_at or now,
    })


def insert_run(database: DatabaseConfig, thread_id: str, *, run_id: str | None = None, status: str = "success",
               operation_kind: str = "run", user_id: str | None = None, assistant_id: str | None = None,
               model_name: str | None = None, message_count: int = 0, total_input_tokens: int = 0,
               total_output_tokens: int = 0, total_tokens: int | None = None, stop_reason: str | None = None,
               error: str | None = None, owner_worker_id: str | None = None,
               lease_expires_at: datetime | None = None, created_at: datetime | None = None,
               updated_at: datetime | None = None, **columns: Any) -> str:
    """Insert one ``runs`` row as DeerFlow's ``RunRepository.put`` / ``create_thread_operation_atomic`` do.

    Args:
        database: the database holding DeerFlow's tables.
        thread_id: the thread the run (or reservation) belongs to.
        run_id: the run id (default: a new UUID4 string).
        status: one of :data:`RUN_STATUSES`; ``pending``/``running`` are *active* (``uq_runs_thread_active``).
        operation_kind: one of :data:`THREAD_OPERATION_KINDS`.
        total_tokens: default ``total_input_tokens + total_output_tokens``.
        columns: any other ``runs`` column by name (e.g. ``idempotency_key``, ``cancel_action``).
        The rest: the columns of the same names; times are aware datetimes (default: now, UTC).

    Returns:
        The run id.

    Raises:
        sqlite3.IntegrityError / psycopg.errors.UniqueViolation: an active run of the thread exists and
        ``status`` is active (``uq_runs_thread_active``), or the run id is taken.
    """
    run_id = run_id or str(uuid.uuid4())
    now = datetime.now(UTC)
    row: dict[str, Any] = {
        "run_id": run_id, "thread_id": thread_id, "assistant_id": assistant_id, "user_id": user_id,
        "status": status, "operation_kind": operation_kind, "model_name": model_name,
        "multitask_strategy": "reject", "metadata_json": {}, "kwargs_json": {}, "error": error,
        "stop_reason": stop_reason, "message_count": message_count, "total_input_tokens": total_input_tokens,
        "total_output_tokens": total_output_tokens,
        "total_tokens": total_input_tokens + total_output_tokens if total_tokens is None else total_tokens,
        "llm_call_count": 0, "lead_agent_tokens": 0, "subagent_tokens": 0, "middleware_tokens": 0,
        "token_usage_by_model": {}, "owner_worker_id": owner_worker_id, "lease_expires_at": lease_expires_at,
        "created_at": created_at or now, "updated_at": updated_at or created_at or now,
    }
    row.update(columns)
    _insert(database, "runs", row)
    return run_id


#: :func:`stand_beside_fixture`'s DeerFlow rows over the real fixture's threads (``tests/fixtures/deerflow-real``).
#: The titles are hostile on purpose: pages must escape them.
FIXTURE_META = {
    "full-short-3t": {"user_id": "alice", "display_name": "Kyoto itinerary <script>alert(1)</script>"},
    "delta-f10-fork": {"user_id": "bob", "display_name": "Sourdough GUIDE & starter", "status": "running"},
    "full-empty": {"user_id": "alice", "display_name": None},
}
#: A ``threads_meta`` row whose thread has no checkpoint (its history is gone).
GONE_THREAD = "gone-thread-0001"


def stand_beside_fixture(database: DatabaseConfig) -> dict[str, str]:
    """Create DeerFlow's tables in the fixture's database and fill them like a live DeerFlow would.

    Rows: :data:`FIXTURE_META` (three fixture threads with titles and owners; the other fixture threads have
    none, so they are orphans once idle: the fixture was written days ago), :data:`GONE_THREAD` (a row
    without checkpoints), and on ``delta-f10-fork`` a finished run and, newer, a ``pending``
    ``checkpoint_write`` reservation (in flight).

    Returns:
        ``{"done": run id of the finished run, "pending": run id of the reservation}``.
    """
    create_deerflow_tables(database)
    for thread_id, row in FIXTURE_META.items():
        insert_thread_meta(database, thread_id, user_id=row["user_id"], display_name=row["display_name"],
                           status=row.get("status") or "idle")
    insert_thread_meta(database, GONE_THREAD, user_id="carol", display_name="History deleted")
    earlier = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    done = insert_run(database, "delta-f10-fork", status="success", model_name="gpt-<b>4o</b>",
                      message_count=12, total_input_tokens=1200, total_output_tokens=345,
                      stop_reason="end_turn", created_at=earlier)
    pending = insert_run(database, "delta-f10-fork", status="pending", operation_kind="checkpoint_write",
                         owner_worker_id="worker-7", created_at=earlier.replace(hour=13))
    return {"done": done, "pending": pending}
