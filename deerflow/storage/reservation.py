"""DeerFlow's durable ``checkpoint_write`` reservation, taken around every rewrite of a stored thread.

DeerFlow admits every thread operation through one row of its ``runs`` table
(its alembic-managed schema, in the checkpoint database): a normal run, or
an internal reservation whose ``operation_kind`` is ``checkpoint_write``
(a write of checkpoints outside a run: ``services.reserve_checkpoint_write``,
``RunManager.reserve_thread_operation``,
``RunRepository.create_thread_operation_atomic``). The partial unique index
``uq_runs_thread_active`` on ``runs(thread_id) WHERE status IN ('pending',
'running')`` is the lock: at most one active operation per thread, across
every process sharing the database. So:

* inserting our reservation fails on that index while DeerFlow has a run
  (or a reservation of its own) pending or running on the thread:
  :class:`RunInFlightError`, and the thread is not touched;
* while our row is there, DeerFlow answers a new run on the thread with its
  own 409 (``ConflictError``: "already has an active run").

The row is written as DeerFlow writes a reservation: ``status = 'pending'``
(reservations never start), ``operation_kind = 'checkpoint_write'``,
``multitask_strategy = 'reject'``, ``owner_worker_id`` naming the holder and
``lease_expires_at`` a lease renewed every third of it while the thread is
worked on (DeerFlow's reconciliation errors out an active row whose lease
expired, and a NULL lease counts as expired, so the lease is always set).
It is committed before the rewrite starts and deleted after the rewrite
committed or rolled back (DeerFlow's ``delete_thread_operation``).

Our rows carry an owner id that starts with :data:`OWNER_PREFIX`
(``checkpoint-admin:<host>:<pid>:<node>``); :func:`release_expired` deletes
only such rows whose lease expired (a holder SIGKILLed mid-job), never a row
of DeerFlow's own.

When the database has no ``runs`` table with DeerFlow's ``operation_kind``
column (no DeerFlow application tables, or a DeerFlow older than its
``0008_thread_operation_kind`` migration), there is nothing to reserve:
:func:`reserve_checkpoint_write` yields ``None`` and the rewrite goes on as
before.

Timestamps are stored as DeerFlow's SQLAlchemy ``DateTime(timezone=True)``
stores them: ``TIMESTAMPTZ`` on Postgres, UTC text
``YYYY-MM-DD HH:MM:SS.ffffff`` on SQLite (its string order is time order).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.errors import DeerFlowError
from deerflow.storage.dialect import Dialect
from deerflow.storage.driver_errors import translated
from deerflow.storage.reservation_rows import (
    ACTIVE_STATUSES,
    OPERATION_KIND,
    OWNER_PREFIX,
    ActiveRun,
    active_run,
    forget_columns,
    held_reservations,
    now_utc,
    read_active,
    release_expired,
    reservation_columns,
    reservations_supported,
    stored_json,
    stored_time,
)

__all__ = [
    "ACTIVE_STATUSES",
    "ActiveRun",
    "DEFAULT_LEASE_S",
    "OPERATION_KIND",
    "OWNER_PREFIX",
    "Reservation",
    "RunInFlightError",
    "active_run",
    "held_reservations",
    "owner_id",
    "release_expired",
    "reservations_supported",
    "reserve_checkpoint_write",
]

log = logging.getLogger("deerflow.reservation")

#: Seconds a reservation lives without renewal (renewed every third of it).
DEFAULT_LEASE_S = 60.0
#: ``runs.owner_worker_id`` is ``String(128)``.
_OWNER_MAX = 128


class RunInFlightError(DeerFlowError):
    """DeerFlow has a run (or a reservation of its own) pending or running on the thread; it was not touched.

    Raised by :func:`reserve_checkpoint_write` when the insert fails on ``uq_runs_thread_active``. What to do:
    nothing; the job records the thread as ``run_in_flight`` and a retry of the job runs it once DeerFlow's run
    has finished.

    Attributes:
        thread_id: the thread.
        run: the active row found (``None`` when it finished between the insert and the look-up).
    """

    def __init__(self, thread_id: str, run: ActiveRun | None) -> None:
        self.thread_id, self.run = thread_id, run
        what = (f"run {run.run_id} ({run.operation_kind}, {run.status}, {run.age_s:.0f} s old)" if run
                else "a run that has just finished")
        super().__init__(f"Thread {thread_id}: DeerFlow has {what} in flight; the thread was not touched.")


@dataclass
class Reservation:
    """A held reservation (what :func:`reserve_checkpoint_write` yields).

    Attributes:
        run_id: the ``runs`` row (a UUID, as DeerFlow's run ids).
        thread_id: the thread reserved.
        owner: ``owner_worker_id`` of the row.
        lease_s: seconds of each lease.
        renewals: successful lease renewals so far (count).
        lost: a renewal found the row gone or no longer active (DeerFlow reclaimed it after its lease expired).
    """

    run_id: str
    thread_id: str
    owner: str
    lease_s: float
    renewals: int = 0
    lost: bool = False


def owner_id(node: str = "", *, host: str | None = None, pid: int | None = None) -> str:
    """``checkpoint-admin:<host>:<pid>:<node>`` (at most 128 characters): names this dashboard's process.

    Args:
        node: the Celery node name (``celery@host``), ``inline`` for a command, or ``""``.
        host, pid: default this machine's host name and this process's id.
    """
    text = f"{OWNER_PREFIX}{host or socket.gethostname()}:{os.getpid() if pid is None else pid}:{node}"
    return text[:_OWNER_MAX]


# -- reserve ---------------------------------------------------------------------------------------------------
def _row(dialect: Dialect, columns: set[str], run_id: str, thread_id: str, owner: str, lease_s: float,
         metadata: dict[str, Any]) -> dict[str, Any]:
    now = now_utc()
    values: dict[str, Any] = {
        "run_id": run_id, "thread_id": thread_id, "assistant_id": None, "user_id": None, "status": "pending",
        "operation_kind": OPERATION_KIND, "multitask_strategy": "reject", "model_name": None,
        "metadata_json": stored_json(dialect, metadata), "kwargs_json": stored_json(dialect, {}),
        "token_usage_by_model": stored_json(dialect, {}), "message_count": 0, "total_input_tokens": 0,
        "total_output_tokens": 0, "total_tokens": 0, "llm_call_count": 0, "lead_agent_tokens": 0,
        "subagent_tokens": 0, "middleware_tokens": 0, "owner_worker_id": owner,
        "lease_expires_at": stored_time(dialect, now + dt.timedelta(seconds=lease_s)),
        "created_at": stored_time(dialect, now), "updated_at": stored_time(dialect, now),
    }
    return {k: v for k, v in values.items() if k in columns}


def _is_unique_violation(exc: BaseException) -> bool:
    import sqlite3

    import psycopg

    if isinstance(exc, psycopg.errors.UniqueViolation):
        return True
    return isinstance(exc, sqlite3.IntegrityError) and "unique" in str(exc).lower()


def _is_too_long(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.errors.StringDataRightTruncation)


def _insert(conn: Any, dialect: Dialect, row: dict[str, Any]) -> None:
    names = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    conn.execute(dialect.sql(f"INSERT INTO runs ({names}) VALUES ({marks})"), tuple(row.values()))


def _delete(database: DatabaseConfig, dialect: Dialect, reservation: Reservation, conn: Any,
            tries: int = 3) -> None:
    """DeerFlow's ``delete_thread_operation``: the row goes, whatever its status now (ours by run id and owner).

    Tried on the reservation's own connection first, then on new ones (a connection the server ended)."""
    sql = dialect.sql("DELETE FROM runs WHERE run_id = ? AND owner_worker_id = ?")
    try:
        with translated(), closing(conn):
            conn.execute(sql, (reservation.run_id, reservation.owner))
        return
    except DeerFlowError:
        log.info("reservation %s: delete on its connection failed; trying a new one", reservation.run_id)
    for attempt in range(tries):
        try:
            with translated(), closing(dialect.connect(database)) as fresh:
                fresh.execute(sql, (reservation.run_id, reservation.owner))
            return
        except DeerFlowError:
            if attempt == tries - 1:
                log.warning("reservation %s of thread %r could not be deleted; its lease (%s s) lets it expire "
                            "and the stalled-job sweep deletes it", reservation.run_id, reservation.thread_id,
                            reservation.lease_s, exc_info=True)
            else:
                threading.Event().wait(0.2 * (attempt + 1))


class _Renewer(threading.Thread):
    """Renews the lease every third of it until stopped; marks the reservation lost when the row is gone."""

    def __init__(self, database: DatabaseConfig, dialect: Dialect, reservation: Reservation) -> None:
        super().__init__(name=f"reservation-{reservation.run_id[:8]}", daemon=True)
        self.database, self.dialect, self.reservation = database, dialect, reservation
        self.stopped = threading.Event()

    def run(self) -> None:
        interval = max(self.reservation.lease_s / 3.0, 0.05)
        while not self.stopped.wait(interval):
            self._renew(timeout=interval)

    def _renew(self, *, timeout: float) -> None:
        r = self.reservation
        until = stored_time(self.dialect, now_utc() + dt.timedelta(seconds=r.lease_s))
        sql = ("UPDATE runs SET lease_expires_at = ?, updated_at = ? WHERE run_id = ? AND owner_worker_id = ? "
               "AND status IN ('pending', 'running')")
        try:
            # SQLite: a rewrite holding the write lock delays this until it commits (it is then held anyway).
            with translated(), closing(self.dialect.connect(self.database, timeout=timeout)) as conn:
                now = stored_time(self.dialect, now_utc())
                cur = conn.execute(self.dialect.sql(sql), (until, now, r.run_id, r.owner))
                if cur.rowcount == 0:
                    r.lost = True
                    log.warning("reservation %s of thread %r is no longer active (DeerFlow reclaimed it)",
                                r.run_id, r.thread_id)
                else:
                    r.renewals += 1
        except DeerFlowError as exc:
            log.info("reservation %s: lease renewal failed, tried again in %.1f s (%s)", r.run_id, timeout, exc)


@contextmanager
def reserve_checkpoint_write(database: DatabaseConfig, thread_id: str, *, owner: str | None = None,
                             lease_s: float = DEFAULT_LEASE_S,
                             metadata: dict[str, Any] | None = None) -> Iterator[Reservation | None]:
    """Hold DeerFlow's ``checkpoint_write`` reservation on ``thread_id`` for the block.

    The row is inserted and committed before the block runs, its lease renewed every ``lease_s / 3`` seconds
    by a background thread while the block runs, and deleted when the block ends (returns or raises).

    Args:
        database: the ``database:`` block of the checkpoint database.
        thread_id: the thread about to be rewritten.
        owner: ``owner_worker_id`` (default :func:`owner_id`); must start with :data:`OWNER_PREFIX`.
        lease_s: seconds of each lease (> 0).
        metadata: stored in ``metadata_json`` for an operator reading DeerFlow's table (e.g. the job id).

    Yields:
        The :class:`Reservation`, or ``None`` when the database has no DeerFlow ``runs`` table, or (Postgres)
        the thread id is longer than its ``thread_id`` column (``VARCHAR(64)``): DeerFlow can admit no run on
        such a thread, so there is nothing to hold.

    Raises:
        ValueError: ``lease_s`` is not positive, or ``owner`` lacks the prefix.
        RunInFlightError: DeerFlow has a run pending or running on the thread (``uq_runs_thread_active``).
        StorageError: the database could not be reached or written (driver errors translated).
    """
    if not lease_s > 0:
        raise ValueError(f"lease_s must be a positive number of seconds; got {lease_s!r}")
    owner = owner or owner_id()
    if not owner.startswith(OWNER_PREFIX):
        raise ValueError(f"owner must start with {OWNER_PREFIX!r} (only such rows are ever swept); got {owner!r}")
    if database.backend == "memory":
        yield None
        return
    dialect = Dialect.of_database(database)
    taken = _take(database, dialect, thread_id, owner, lease_s, metadata or {})
    if taken is None:
        yield None
        return
    reservation, conn = taken
    renewer = _Renewer(database, dialect, reservation)
    renewer.start()
    try:
        yield reservation
    finally:
        renewer.stopped.set()
        renewer.join()
        _delete(database, dialect, reservation, conn)


def _take(database: DatabaseConfig, dialect: Dialect, thread_id: str, owner: str, lease_s: float,
          metadata: dict[str, Any]) -> tuple[Reservation, Any] | None:
    """The reservation and its open connection (kept for the delete), or ``None`` without DeerFlow's table."""
    with translated():
        conn = dialect.connect(database)
    try:
        with translated():
            if dialect is Dialect.POSTGRES:
                # The row's own commits need not wait for the disk: the rewrite's later (synchronous) commit
                # flushes the log past them, and a row lost in a server crash is one the sweep would remove.
                conn.execute("SET synchronous_commit = off")
            columns = reservation_columns(conn, dialect, database)
            if columns is None:
                conn.close()
                return None
            run_id = str(uuid.uuid4())
            try:
                _insert(conn, dialect, _row(dialect, columns, run_id, thread_id, owner, lease_s, metadata))
            except Exception as exc:
                if _is_too_long(exc):  # DeerFlow's runs.thread_id is VARCHAR(64): it can never hold this thread
                    conn.close()
                    return None
                if not _is_unique_violation(exc):
                    forget_columns(database)
                    raise
                raise RunInFlightError(thread_id, read_active(conn, dialect, thread_id)) from exc
    except BaseException:
        conn.close()
        raise
    return Reservation(run_id=run_id, thread_id=thread_id, owner=owner, lease_s=lease_s), conn


