"""DeerFlow's table facts: its enums, which tables and columns a database holds, stored values read safely."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from deerflow.dialect import Dialect

#: A thread without a ``threads_meta`` row is an orphan once idle this long (seconds): one day.
DEFAULT_ORPHAN_MIN_IDLE_S = 86_400
#: ``threads_meta.user_id`` is ``VARCHAR(64)`` in DeerFlow's model.
MAX_OWNER_LENGTH = 64
#: Runs shown per thread, newest first.
RUNS_SHOWN = 50


class RunStatus(StrEnum):
    """DeerFlow's ``RunStatus`` (``runtime/runs/schemas.py``)."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


#: The statuses of a run (or reservation) in flight: the ``WHERE`` of ``uq_runs_thread_active``.
ACTIVE_RUN_STATUSES = (RunStatus.PENDING.value, RunStatus.RUNNING.value)


class ThreadOperationKind(StrEnum):
    """DeerFlow's ``ThreadOperationKind``: what holds a thread's admission (``runs.operation_kind``)."""

    RUN = "run"
    CHECKPOINT_WRITE = "checkpoint_write"
    ARTIFACT_WRITE = "artifact_write"
    DELETE = "delete"


META_COLUMNS = ("thread_id", "display_name", "user_id", "status", "assistant_id", "created_at", "updated_at")
RUN_COLUMNS = ("run_id", "thread_id", "status", "operation_kind", "model_name", "total_input_tokens",
                "total_output_tokens", "total_tokens", "message_count", "stop_reason", "error", "created_at",
                "updated_at", "owner_worker_id", "lease_expires_at")


@dataclass(frozen=True)
class Presence:
    """Which of DeerFlow's tables a database holds, and their columns.

    Attributes:
        threads_meta: the columns of ``threads_meta`` (empty: no such table, or none with ``thread_id``).
        runs: the columns of ``runs`` (empty: no such table, or none with ``run_id`` and ``thread_id``).
    """

    threads_meta: frozenset[str] = frozenset()
    runs: frozenset[str] = frozenset()

    @property
    def has_threads_meta(self) -> bool:
        """True when ``threads_meta`` can be read (it has ``thread_id``)."""
        return "thread_id" in self.threads_meta

    @property
    def has_runs(self) -> bool:
        """True when ``runs`` can be read (it has ``run_id`` and ``thread_id``)."""
        return {"run_id", "thread_id"} <= self.runs


#: A database without DeerFlow's tables.
ABSENT = Presence()


#: One catalog query for both tables: ``(tbl, name)`` per column. Postgres: resolved on the search path, and a
#: table this role may not read counts as absent (the pages keep working as on a bare LangGraph database).
_COLUMNS_SQL = {
    Dialect.SQLITE: "SELECT m.name AS tbl, p.name AS name FROM sqlite_master m, pragma_table_info(m.name) p "
                    "WHERE m.type = 'table' AND m.name IN ('threads_meta', 'runs')",
    Dialect.POSTGRES: "SELECT CASE WHEN a.attrelid = to_regclass('threads_meta') THEN 'threads_meta' ELSE 'runs' END "
                      "AS tbl, a.attname AS name FROM pg_attribute a "
                      "WHERE a.attrelid IN (to_regclass('threads_meta'), to_regclass('runs')) AND a.attnum > 0 "
                      "AND NOT a.attisdropped AND has_table_privilege(a.attrelid, 'SELECT')",
}


def presence(db: Any) -> Presence:
    """Which of DeerFlow's tables ``db``'s database holds (Postgres: on its search path), with their columns
    (one catalog query).

    Returns:
        A :class:`Presence`; :data:`ABSENT` when neither table exists.

    Raises:
        StorageError: the catalog could not be read.
    """
    columns: dict[str, set[str]] = {"threads_meta": set(), "runs": set()}
    for row in db.query(_COLUMNS_SQL[Dialect(db.dialect)]):
        columns[str(row["tbl"])].add(str(row["name"]))
    meta, runs = frozenset(columns["threads_meta"]), frozenset(columns["runs"])
    return Presence(threads_meta=meta if "thread_id" in meta else frozenset(),
                    runs=runs if {"run_id", "thread_id"} <= runs else frozenset())


# -- stored values, taken as untrusted -------------------------------------------------------------------

def stored_text(value: Any) -> str | None:
    """A stored value as text (bytes decoded as UTF-8, replacing what does not decode), or ``None``."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def stored_int(value: Any) -> int | None:
    """A stored value as an integer, or ``None`` when it is none (SQLite keeps any value in any column)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def stored_time(value: Any) -> dt.datetime | None:
    """A stored timestamp as an aware UTC datetime (SQLite: SQLAlchemy's text, naive means UTC), else ``None``."""
    if isinstance(value, dt.datetime):
        moment = value
    else:
        text = stored_text(value)
        if not text:
            return None
        try:
            moment = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            return None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def select_columns(columns: frozenset[str], wanted: tuple[str, ...], alias: str = "") -> str:
    """``SELECT`` list of ``wanted``: each column the table has, ``NULL AS`` the name of each it lacks."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{c} AS {c}" if c in columns else f"NULL AS {c}" for c in wanted)
