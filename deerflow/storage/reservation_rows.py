"""DeerFlow's ``runs`` table as the reservation reads it: detection, DeerFlow's time format, the active row of a
thread, and the sweep of this dashboard's expired reservations (:func:`release_expired`).

The facts (``bytedance/deer-flow``, ``persistence/run/model.py`` and its migrations): a reservation row has
``operation_kind = 'checkpoint_write'`` (migration 0008), an ``owner_worker_id`` and a ``lease_expires_at``
(migration 0004); ``DateTime(timezone=True)`` is ``TIMESTAMPTZ`` on Postgres and UTC text
``YYYY-MM-DD HH:MM:SS.ffffff`` on SQLite (SQLAlchemy's format, whose string order is time order).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.storage.dialect import Dialect
from deerflow.storage.driver_errors import translated

__all__ = ["ACTIVE_STATUSES", "ActiveRun", "OPERATION_KIND", "OWNER_PREFIX", "active_run", "held_reservations",
           "forget_columns", "now_utc", "read_active", "release_expired", "reservation_columns",
           "reservations_supported",
           "stored_json", "stored_time"]

log = logging.getLogger("deerflow.reservation")

#: DeerFlow's ``ThreadOperationKind.checkpoint_write``.
OPERATION_KIND = "checkpoint_write"
#: The statuses the partial unique index ``uq_runs_thread_active`` covers (DeerFlow's active statuses).
ACTIVE_STATUSES = ("pending", "running")
#: How every owner id this dashboard writes begins; :func:`release_expired` touches only such rows.
OWNER_PREFIX = "checkpoint-admin:"

_SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"


@dataclass(frozen=True)
class ActiveRun:
    """A ``runs`` row holding a thread (status ``pending`` or ``running``).

    Attributes:
        run_id, thread_id, status, operation_kind: the row's columns (``operation_kind`` ``run`` for a user's
            run, ``checkpoint_write`` / ``artifact_write`` / ``delete`` for reservations).
        owner_worker_id: the process holding it (DeerFlow: ``<host>:<uuid hex>``; this dashboard:
            ``checkpoint-admin:<host>:<pid>:<node>``), or ``None``.
        created_at, lease_expires_at: aware UTC datetimes (``lease_expires_at`` ``None`` without a lease).
        age_s: seconds since ``created_at`` when it was read.
    """

    run_id: str
    thread_id: str
    status: str
    operation_kind: str
    owner_worker_id: str | None
    created_at: dt.datetime | None
    lease_expires_at: dt.datetime | None
    age_s: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"run_id", "status", "operation_kind", "owner_worker_id", "created_at", "age_s"}``."""
        return {"run_id": self.run_id, "status": self.status, "operation_kind": self.operation_kind,
                "owner_worker_id": self.owner_worker_id,
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "age_s": round(self.age_s, 1)}



# -- time as DeerFlow stores it --------------------------------------------------------------------------------
def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def stored_time(dialect: Dialect, moment: dt.datetime) -> Any:
    return moment.astimezone(dt.UTC).strftime(_SQLITE_TIME) if dialect is Dialect.SQLITE else moment


def _read_time(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
    moment: dt.datetime = value  # the driver's datetime, or the SQLite text parsed above
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def stored_json(dialect: Dialect, value: dict[str, Any]) -> Any:
    if dialect is Dialect.SQLITE:
        return json.dumps(value)
    from psycopg.types.json import Json

    return Json(value)


# -- detection -------------------------------------------------------------------------------------------------
def _columns(conn: Any, dialect: Dialect) -> set[str]:
    if dialect is Dialect.SQLITE:
        return {row[1] for row in conn.execute("PRAGMA table_info(runs)").fetchall()}
    rows = conn.execute("SELECT a.attname AS name FROM pg_attribute a WHERE a.attrelid = to_regclass('runs') "
                        "AND a.attnum > 0 AND NOT a.attisdropped").fetchall()
    return {row["name"] for row in rows}


#: Seconds a database's ``runs`` columns, once found, are reused without asking the catalog again.
COLUMNS_TTL_S = 300.0
_found: dict[tuple[Any, ...], tuple[float, set[str]]] = {}


def _identity(database: DatabaseConfig) -> tuple[Any, ...]:
    return (database.backend, database.postgres_url, database.postgres_schema, database.sqlite_dir)


def reservation_columns(conn: Any, dialect: Dialect, database: DatabaseConfig | None = None) -> set[str] | None:
    """The columns of DeerFlow's ``runs`` when it has the reservation's, else ``None``.

    With ``database``, a table found is remembered for :data:`COLUMNS_TTL_S` seconds (a table not found is
    asked again every time, so DeerFlow's tables are used as soon as they appear); :func:`forget_columns`
    drops the memory after an insert failed.
    """
    key = _identity(database) if database is not None else None
    if key is not None and key in _found and time.monotonic() - _found[key][0] < COLUMNS_TTL_S:
        return _found[key][1]
    columns = _columns(conn, dialect)
    if not {"run_id", "thread_id", "status", "operation_kind", "owner_worker_id", "lease_expires_at"} <= columns:
        return None
    if key is not None:
        _found[key] = (time.monotonic(), columns)
    return columns


def forget_columns(database: DatabaseConfig) -> None:
    """Ask the catalog again next time (the table changed under a remembered column list)."""
    _found.pop(_identity(database), None)


def reservations_supported(database: DatabaseConfig) -> bool:
    """True when the checkpoint database holds DeerFlow's ``runs`` table with its reservation columns
    (``operation_kind``, ``owner_worker_id``, ``lease_expires_at``); ``backend: memory`` answers False.

    Raises:
        StorageError: the database cannot be read.
    """
    if database.backend == "memory":
        return False
    dialect = Dialect.of_database(database)
    with translated(), closing(dialect.connect(database)) as conn:
        return reservation_columns(conn, dialect) is not None


# -- the active row --------------------------------------------------------------------------------------------
_ACTIVE_SQL = ("SELECT run_id, thread_id, status, operation_kind, owner_worker_id, created_at, lease_expires_at "
               "FROM runs WHERE thread_id = ? AND status IN ('pending', 'running') ORDER BY created_at LIMIT 1")


def read_active(conn: Any, dialect: Dialect, thread_id: str) -> ActiveRun | None:
    cur = conn.execute(dialect.sql(_ACTIVE_SQL), (thread_id,))
    rows = dialect.rows(cur)
    if not rows:
        return None
    return _active_run(rows[0], now_utc())


def _active_run(row: dict[str, Any], now: dt.datetime) -> ActiveRun:
    created = _read_time(row["created_at"])
    age = (now - created).total_seconds() if created else 0.0
    return ActiveRun(run_id=row["run_id"], thread_id=row["thread_id"], status=row["status"],
                     operation_kind=row["operation_kind"], owner_worker_id=row["owner_worker_id"],
                     created_at=created, lease_expires_at=_read_time(row["lease_expires_at"]), age_s=max(age, 0.0))


def active_run(database: DatabaseConfig, thread_id: str) -> ActiveRun | None:
    """DeerFlow's active row (``pending`` / ``running``) on ``thread_id``, or ``None`` (also without the tables).

    Raises:
        StorageError: the database cannot be read.
    """
    if database.backend == "memory":
        return None
    dialect = Dialect.of_database(database)
    with translated(), closing(dialect.connect(database)) as conn:
        return read_active(conn, dialect, thread_id) if reservation_columns(conn, dialect) else None


# -- recovery --------------------------------------------------------------------------------------------------
def release_expired(database: DatabaseConfig, *, now: dt.datetime | None = None) -> list[str]:
    """Delete this dashboard's reservations whose lease has expired (a holder killed mid-job); DeerFlow's own
    rows are never touched (only owner ids starting with :data:`OWNER_PREFIX`, kind ``checkpoint_write``).

    A live holder renews its lease every third of it, so an expired lease means its process is gone (or cut off
    from the database for a whole lease, and then DeerFlow would reclaim the row as well).

    Args:
        database: the ``database:`` block.
        now: the time to compare leases with (default now, UTC).

    Returns:
        The run ids deleted (``[]`` without DeerFlow's tables or on ``backend: memory``).

    Raises:
        StorageError: the database could not be reached or written.
    """
    if database.backend == "memory":
        return []
    dialect = Dialect.of_database(database)
    moment = stored_time(dialect, now or now_utc())
    where = ("operation_kind = ? AND owner_worker_id LIKE ? AND "
             "(lease_expires_at IS NULL OR lease_expires_at < ?)")
    params = (OPERATION_KIND, OWNER_PREFIX + "%", moment)
    with translated(), closing(dialect.connect(database)) as conn:
        if reservation_columns(conn, dialect) is None:
            return []
        cur = conn.execute(dialect.sql(f"DELETE FROM runs WHERE {where} RETURNING run_id"), params)
        gone = [row["run_id"] for row in dialect.rows(cur)]
    if gone:
        log.warning("released %d expired dashboard reservation(s): %s", len(gone), ", ".join(gone))
    return gone


def held_reservations(database: DatabaseConfig) -> list[ActiveRun]:
    """This dashboard's reservation rows now in ``runs`` (any status), oldest first; ``[]`` without the tables."""
    if database.backend == "memory":
        return []
    dialect = Dialect.of_database(database)
    sql = ("SELECT run_id, thread_id, status, operation_kind, owner_worker_id, created_at, lease_expires_at "
           "FROM runs WHERE operation_kind = ? AND owner_worker_id LIKE ? ORDER BY created_at")
    with translated(), closing(dialect.connect(database)) as conn:
        if reservation_columns(conn, dialect) is None:
            return []
        rows = dialect.rows(conn.execute(dialect.sql(sql), (OPERATION_KIND, OWNER_PREFIX + "%")))
    now = now_utc()
    return [_active_run(row, now) for row in rows]
