"""``runs`` read for the thread page: a thread's runs and reservations, and everything DeerFlow says of it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from deerflow.storage.deerflow_tables.schema import (
    ABSENT,
    ACTIVE_RUN_STATUSES,
    RUN_COLUMNS,
    RUNS_SHOWN,
    Presence,
    presence,
    select_columns,
    stored_int,
    stored_text,
    stored_time,
)
from deerflow.storage.deerflow_tables.threads import ThreadMeta, thread_meta


@dataclass(frozen=True)
class RunRecord:
    """One ``runs`` row: a DeerFlow run, or a reservation another operation holds on the thread.

    Attributes:
        run_id, thread_id: ids.
        status: one of :class:`RunStatus` (as stored).
        operation_kind: one of :class:`ThreadOperationKind` (``None``: a DeerFlow older than the column).
        model_name: the model, or ``None``.
        input_tokens, output_tokens, total_tokens: token counts (``None`` when unreadable).
        message_count: messages the run wrote (count).
        stop_reason: why it stopped (DeerFlow's words), or ``None``.
        error: the error text, or ``None``.
        created_at, updated_at: UTC, or ``None``.
        owner_worker_id: the worker (or process) that owns it, or ``None``.
        lease_expires_at: when its owner's lease ends (UTC), or ``None``.
    """

    run_id: str
    thread_id: str
    status: str | None
    operation_kind: str | None
    model_name: str | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    message_count: int | None
    stop_reason: str | None
    error: str | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None
    owner_worker_id: str | None
    lease_expires_at: dt.datetime | None

    @property
    def in_flight(self) -> bool:
        """True while the run (or reservation) is ``pending`` or ``running``: DeerFlow admits nothing else."""
        return self.status in ACTIVE_RUN_STATUSES


def _run(row: dict[str, Any]) -> RunRecord:
    return RunRecord(
        run_id=str(row["run_id"]), thread_id=str(row["thread_id"]), status=stored_text(row["status"]),
        operation_kind=stored_text(row["operation_kind"]), model_name=stored_text(row["model_name"]),
        input_tokens=stored_int(row["total_input_tokens"]), output_tokens=stored_int(row["total_output_tokens"]),
        total_tokens=stored_int(row["total_tokens"]), message_count=stored_int(row["message_count"]),
        stop_reason=stored_text(row["stop_reason"]), error=stored_text(row["error"]),
        created_at=stored_time(row["created_at"]), updated_at=stored_time(row["updated_at"]),
        owner_worker_id=stored_text(row["owner_worker_id"]), lease_expires_at=stored_time(row["lease_expires_at"]))


def thread_runs(db: Any, thread_id: str, *, limit: int = RUNS_SHOWN,
                tables: Presence | None = None) -> tuple[int, list[RunRecord]]:
    """A thread's runs and reservations, newest first (in-flight ones first of all).

    Args:
        thread_id: the thread.
        limit: rows returned (count).

    Returns:
        ``(how many rows the thread has, up to limit of them)``; ``(0, [])`` without ``runs``.
    """
    tables = presence(db) if tables is None else tables
    if not tables.has_runs:
        return 0, []
    count = int(db.query("SELECT COUNT(*) AS n FROM runs WHERE thread_id = ?", [thread_id])[0]["n"])
    if not count:
        return 0, []
    active = ""
    if "status" in tables.runs:
        active = f"CASE WHEN status IN ({', '.join(repr(s) for s in ACTIVE_RUN_STATUSES)}) THEN 0 ELSE 1 END, "
    order = f"{active}{'created_at DESC, ' if 'created_at' in tables.runs else ''}run_id DESC"
    rows = db.query(f"SELECT {select_columns(tables.runs, RUN_COLUMNS)} FROM runs WHERE thread_id = ? "
                    f"ORDER BY {order} LIMIT {int(limit)}", [thread_id])
    return count, [_run(r) for r in rows]


@dataclass(frozen=True)
class ThreadFacts:
    """What DeerFlow's tables say about one thread (the thread page and its JSON).

    Attributes:
        tables: which of DeerFlow's tables the database holds.
        meta: the thread's ``threads_meta`` row, or ``None``.
        run_count: the thread's ``runs`` rows (count).
        runs: up to :data:`RUNS_SHOWN` of them, in flight first, then newest first.
    """

    tables: Presence
    meta: ThreadMeta | None = None
    run_count: int = 0
    runs: tuple[RunRecord, ...] = ()

    @property
    def deerflow_thread(self) -> bool | None:
        """True: DeerFlow has a row for the thread; False: it has none; ``None``: no ``threads_meta`` table."""
        return (self.meta is not None) if self.tables.has_threads_meta else None

    @property
    def in_flight(self) -> RunRecord | None:
        """The run or reservation in flight on the thread (``pending``/``running``), or ``None``."""
        return next((r for r in self.runs if r.in_flight), None)

    def as_json(self) -> dict[str, Any]:
        """``{"title", "owner", "deerflow_thread"}``: the keys every thread JSON carries."""
        return {"title": self.meta.title if self.meta else None, "owner": self.meta.owner if self.meta else None,
                "deerflow_thread": self.deerflow_thread}


def thread_facts(db: Any, thread_id: str, *, with_runs: bool = True) -> ThreadFacts:
    """DeerFlow's row and runs of one thread (primary-key and ``ix_runs_thread_id`` lookups).

    Args:
        with_runs: also read the thread's runs (the page); ``False``: the row only (the JSON keys).

    Returns:
        The facts; ``ThreadFacts(ABSENT)`` when the database has neither table.
    """
    tables = presence(db)
    if tables == ABSENT:
        return ThreadFacts(ABSENT)
    meta = thread_meta(db, [thread_id], tables=tables).get(thread_id)
    count, runs = thread_runs(db, thread_id, tables=tables) if with_runs else (0, [])
    return ThreadFacts(tables, meta, count, tuple(runs))
