"""Keeping the summary current: the watermark refresh, targeted recomputes, freshness.

Refresh law: checkpoint ids are UUIDv6 and sort by creation time, so the
threads touched since the last refresh are ``DISTINCT thread_id FROM
checkpoints WHERE checkpoint_id > watermark`` (an index range scan). Each
touched thread's row is recomputed from *its own* rows (the ``thread_id``
indexes), never patched, so a stored row always equals the aggregate of the
thread when it was read::

    row(t) == row_select_sql(WHERE thread_id = t)      (deerflow.inventory.summary.rows)

What the watermark cannot see, and what catches it:

* rows committed after a refresh moved past their ids (a slow writer, a
  skewed clock): :func:`refresh` with ``lag_s`` rescans that far behind the
  watermark (the periodic task: 120 s);
* rewrites that keep ids: conversions and reverts are noticed through
  ``dfa_backups`` (:mod:`deerflow.convert`'s table); :func:`refresh_threads`
  recomputes named threads (the thread page heals its own row); a full
  reconcile (``full=True``) rebuilds every row and drops vanished threads;
* rows written below the watermark (a backfill, a restore, a bulk load with
  old ids): the *count check* (``verify_s``) compares, in one statement,
  ``COUNT(*)`` of ``checkpoints`` at or below the watermark with the
  summary's ``SUM(checkpoint_count)``. The difference, when positive, is a
  lower bound of the checkpoints the summary misses (rows counted above the
  watermark or of deleted threads only lower it), so a positive ``missing``
  is never a false alarm; it is stored until the next check or full
  refresh, and ``rebuild_missing`` turns it into a full rebuild at once.
  Cost: one count of ``checkpoints`` (an index-only scan on Postgres) and
  one of the summary.

Concurrency: on Postgres one refresher at a time (a transaction-level
advisory lock; the others skip); on SQLite the write lock serializes them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from deerflow.inventory.summary.cadences import replace_cadences
from deerflow.inventory.summary.rows import bump_version, recompute, upsert_rows
from deerflow.inventory.summary.schema import access, ensure_schema, forget, is_summary_table_missing
from deerflow.inventory.summary.writes import id_floor, replace_writes
from deerflow.storage.dialect import Dialect
from deerflow.storage.sqlread import SqlReader, Tx, checkpoint_time, reader_for, table_exists

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["Freshness", "RefreshReport", "ensure_fresh", "freshness", "id_floor", "readable", "refresh",
           "refresh_threads", "version"]

_LOCK_KEY = "dfa.summary"


@dataclass(frozen=True)
class RefreshReport:
    """What one refresh did.

    Attributes:
        kind: ``"full"``, ``"incremental"`` (0 threads when nothing was new), ``"skipped"`` (another
            refresher held the lock) or ``"unavailable"`` (this role may not write the summary; from
            :func:`dashboard.threads.storage.refresh_inventory`).
        threads: thread rows recomputed (count).
        watermark: the checkpoint id the summary is now complete up to (``None``: empty database).
        seconds: wall time (seconds).
        missing: checkpoints at or below the watermark the summary did not count, found by this
            refresh's count check before any rebuild (count; a lower bound); ``None``: not checked.
    """

    kind: str
    threads: int
    watermark: str | None
    seconds: float
    missing: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        return asdict(self)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _locked(tx: Tx) -> bool:
    sql = tx.dialect.try_lock_sql()
    return True if sql is None else bool(tx.query(sql, [_LOCK_KEY])[0]["ok"])


def refresh(saver: BaseCheckpointSaver[Any], *, full: bool = False, lag_s: float = 0.0, verify_s: float | None = None,
            rebuild_missing: bool = False) -> RefreshReport:
    """Bring the summary up to date.

    Args:
        saver: SQLite or Postgres saver.
        full: rebuild every row from LangGraph's tables and drop rows of vanished threads
            (also done automatically when the summary was never built). Clears ``missing``.
        lag_s: also recompute threads with checkpoints up to this many seconds older than the
            watermark (catches rows committed late; seconds).
        verify_s: run the count check (module docstring) when the last one is at least this
            old (seconds; ``0``: always; ``None``: never) and store its ``missing``.
        rebuild_missing: when the check finds missing checkpoints, rebuild every row in the
            same transaction (the report's ``kind`` is then ``"full"``).

    Returns:
        A :class:`RefreshReport`.

    Raises:
        psycopg.Error / sqlite3.Error: e.g. this role may not write the summary.
    """
    started = time.monotonic()
    ensure_schema(saver)
    reader = reader_for(saver)
    missing = None
    with reader.transaction() as tx:
        if not _locked(tx):
            return RefreshReport("skipped", 0, None, 0.0)
        state = tx.query("SELECT * FROM dfa_summary_state WHERE id = 1")[0]
        if full or state["watermark"] is None:
            kind, count, mark = "full", *_full(tx, reader)
        else:
            kind, count, mark = "incremental", *_incremental(tx, reader, state["watermark"], lag_s)
        count += _backups(tx, reader, state, rescan=kind != "full")
        if kind != "full" and _due(state.get("verified_at"), verify_s):
            missing = _missing(tx, mark)
            if missing and rebuild_missing:
                kind, count, mark = "full", *_full(tx, reader)
        now = _now()
        sets = ["watermark = ?", "refreshed_at = ?"]
        params: list[object] = [mark, now]
        if kind == "full":
            sets += ["full_refresh_at = ?", "missing = ?"]
            params += [now, 0]
        elif missing is not None:
            sets += ["missing = ?"]
            params += [missing]
        if missing is not None:
            sets += ["verified_at = ?"]
            params += [now]
        tx.execute(f"UPDATE dfa_summary_state SET {', '.join(sets)} WHERE id = 1", params)
    return RefreshReport(kind, count, mark, round(time.monotonic() - started, 4), missing)


def _due(verified_at: str | None, verify_s: float | None) -> bool:
    """True when a count check is asked for and the last one is at least ``verify_s`` seconds old."""
    if verify_s is None:
        return False
    if verify_s <= 0 or not verified_at:
        return True
    try:
        last = dt.datetime.fromisoformat(verified_at)
    except ValueError:
        return True
    return (dt.datetime.now(dt.UTC) - last).total_seconds() >= verify_s


def _missing(tx: Tx, mark: str | None) -> int:
    """Checkpoints at or below ``mark`` the summary does not count (a lower bound, >= 0; one statement)."""
    if mark is None:
        return 0
    row = tx.query("SELECT (SELECT COUNT(*) FROM checkpoints WHERE checkpoint_id <= ?) AS below, "
                   "(SELECT COALESCE(SUM(checkpoint_count), 0) FROM dfa_thread_summary) AS counted", [mark])[0]
    return max(0, int(row["below"]) - int(row["counted"]))


def _full(tx: Tx, reader: SqlReader) -> tuple[int, str | None]:
    # Read the high-water mark first: the aggregate below sees at least these rows.
    mark = tx.query("SELECT MAX(checkpoint_id) AS m FROM checkpoints")[0]["m"]
    bump_version(tx)
    count = upsert_rows(tx, reader, "thread_id IS NOT NULL", [])
    replace_writes(tx, reader, "thread_id IS NOT NULL", [])
    replace_cadences(tx, reader, "thread_id IS NOT NULL", [])  # reads the writes' snapshot facts
    tx.execute("DELETE FROM dfa_thread_summary WHERE NOT EXISTS ("
               "SELECT 1 FROM checkpoints c WHERE c.thread_id = dfa_thread_summary.thread_id)")
    return count, mark


def _incremental(tx: Tx, reader: SqlReader, watermark: str, lag_s: float) -> tuple[int, str]:
    newest = tx.query("SELECT MAX(checkpoint_id) AS m FROM checkpoints WHERE checkpoint_id > ?", [watermark])[0]["m"]
    since = watermark
    if lag_s > 0 and (moment := checkpoint_time(watermark)) is not None:
        since = min(watermark, id_floor(moment - dt.timedelta(seconds=lag_s)))
    elif newest is None:
        return 0, watermark
    touched = [r["thread_id"] for r in tx.query(
        "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_id > ?", [since])]
    return recompute(tx, reader, touched), max(watermark, newest or watermark)


def _backup_marks(tx: Tx, dialect: Dialect) -> tuple[str, int] | None:
    """``(newest backup time, restored backups)`` of ``deerflow.convert``'s ``dfa_backups``, or ``None`` if absent."""
    if not table_exists(tx, "dfa_backups"):
        return None
    row = tx.query(f"SELECT MAX({dialect.timestamp_text('created_at')}) AS newest, "
                   "SUM(CASE WHEN status = 'restored' THEN 1 ELSE 0 END) AS restored FROM dfa_backups")[0]
    return row["newest"] or "", int(row["restored"] or 0)


def _backups(tx: Tx, reader: SqlReader, state: dict[str, Any], *, rescan: bool) -> int:
    """Recompute threads converted or reverted since the last refresh (their ids did not change)."""
    marks = _backup_marks(tx, reader.dialect)
    seen = (state.get("backups_seen") or "", int(state.get("restored_seen") or 0))
    if marks is None or marks == seen:
        return 0
    tx.execute("UPDATE dfa_summary_state SET backups_seen = ?, restored_seen = ? WHERE id = 1", list(marks))
    if not rescan:
        return 0
    ids = [r["thread_id"] for r in tx.query(
        f"SELECT DISTINCT thread_id FROM dfa_backups WHERE {reader.dialect.timestamp_text('created_at')} > ? OR "
        "(status = 'restored' AND ? <> ?)", [seen[0], marks[1], seen[1]])]
    return recompute(tx, reader, ids)


def version(saver: BaseCheckpointSaver[Any]) -> int | None:
    """The summary's change counter, after :func:`readable` (which may refresh it first).

    Every transaction that rewrites summary rows (a refresh that recomputed any thread, a full
    rebuild, :func:`refresh_threads`, a seed) adds one, so anything derived from the summary
    tables alone may be cached under ``(saver's database, version)``.

    Returns:
        The counter, or ``None`` when the summary cannot be used (not readable, or not built:
        readers then aggregate LangGraph's tables live, which no counter follows).
    """
    if not readable(saver):
        return None
    state = reader_for(saver).query("SELECT * FROM dfa_summary_state WHERE id = 1")[0]
    if state["watermark"] is None or state.get("version") is None:  # absent before this role's tables migrated
        return None
    return int(state["version"])


def refresh_threads(saver: BaseCheckpointSaver[Any], thread_ids: list[str]) -> int:
    """Recompute the rows of ``thread_ids`` now (e.g. after rewriting them); returns rows written."""
    ensure_schema(saver)
    reader = reader_for(saver)
    with reader.transaction() as tx:
        return recompute(tx, reader, list(dict.fromkeys(thread_ids)))


# -- freshness on the request path ---------------------------------------------------

@dataclass(frozen=True)
class Freshness:
    """How current the summary is.

    Attributes:
        watermark: checkpoint id the summary is complete up to (``None``: never built or empty).
        as_of: time of the watermark's checkpoint (UTC) or ``None``.
        pending: checkpoints newer than the watermark, counted up to the budget + 1 (count).
        refreshed_at: when a refresh last ran (ISO 8601) or ``None``.
        full_refresh_at: when the last full reconcile ran (ISO 8601) or ``None``.
        backups_changed: threads were converted or reverted since the last refresh.
        refreshed: this call refreshed the summary.
        missing: checkpoints at or below the watermark the summary misses, as the last count check
            found them (count, a lower bound; 0 after a full refresh; ``None``: never checked).
            While positive the summary is *not* complete up to ``as_of``.
        verified_at: when the last count check ran (ISO 8601) or ``None``.
    """

    watermark: str | None
    as_of: dt.datetime | None
    pending: int
    refreshed_at: str | None
    full_refresh_at: str | None
    backups_changed: bool = False
    refreshed: bool = False
    missing: int | None = None
    verified_at: str | None = None

    @property
    def complete(self) -> bool:
        """True unless the last count check found checkpoints below the watermark missing."""
        return not self.missing


def freshness(saver: BaseCheckpointSaver[Any], *, budget: int = 2000) -> Freshness:
    """Read the watermark and count (up to ``budget + 1``) checkpoints newer than it. Writes nothing.

    The summary tables must exist and be readable (:func:`deerflow.inventory.summary.schema.access`).
    ``missing`` is the stored result of the last count check (:func:`refresh` with ``verify_s``),
    not a new count: this runs on every list request.

    Returns:
        A :class:`Freshness`.
    """
    reader = reader_for(saver)
    with reader.reading() as tx:
        state = tx.query("SELECT * FROM dfa_summary_state WHERE id = 1")[0]
        mark = state["watermark"]
        newer, params = ("WHERE checkpoint_id > ?", [mark]) if mark is not None else ("", [])
        pending = int(tx.query(f"SELECT COUNT(*) AS n FROM (SELECT 1 FROM checkpoints {newer} "
                               f"LIMIT {int(budget) + 1}) p", params)[0]["n"])
        marks = _backup_marks(tx, reader.dialect)
    changed = marks is not None and marks != (state["backups_seen"] or "", int(state["restored_seen"] or 0))
    missing = state.get("missing")  # absent before this role's tables were migrated
    return Freshness(mark, checkpoint_time(mark), pending, state["refreshed_at"], state["full_refresh_at"], changed,
                     missing=None if missing is None else int(missing), verified_at=state.get("verified_at"))


def ensure_fresh(saver: BaseCheckpointSaver[Any], *, budget: int = 2000) -> Freshness:
    """Refresh inline when it is cheap, else leave it to the periodic task.

    Cheap means at most ``budget`` checkpoints arrived since the watermark
    (then only the threads they touch are recomputed). A summary that was
    never built is built here whatever its size (run ``manage.py
    refresh_inventory`` once after deploying on a large database instead).
    Staleness bound otherwise: one period of the periodic refresh.

    Returns:
        The :class:`Freshness` after any refresh.
    """
    fresh = freshness(saver, budget=budget)
    built = fresh.refreshed_at is not None
    if built and not fresh.backups_changed and (fresh.pending == 0 or fresh.pending > budget):
        return fresh
    refresh(saver)
    return dataclasses.replace(freshness(saver, budget=budget), refreshed=True)


def readable(saver: BaseCheckpointSaver[Any], *, refresh: bool = True) -> bool:
    """True when readers may use the summary table for this saver (refreshing it first if allowed and cheap).

    False when this role cannot use the tables (:func:`deerflow.inventory.summary.schema.access` is
    ``"none"``), or may only read them and they were never built: callers then aggregate
    LangGraph's tables live. Tables dropped under this process are recreated (and
    rebuilt) once, instead of failing every request until a restart.
    """
    try:
        return _readable(saver, refresh)
    except Exception as exc:
        if not is_summary_table_missing(exc):
            raise
        forget(saver)  # the tables were dropped under this process: migrate (and rebuild) again
        return _readable(saver, refresh)


def _readable(saver: BaseCheckpointSaver[Any], refresh: bool) -> bool:
    allowed = access(saver)
    if allowed == "write":
        if refresh:
            ensure_fresh(saver)
        return True
    return allowed == "read" and freshness(saver).refreshed_at is not None
