"""Prune many threads at once: one connection for the batch, LangGraph's own ``prune`` where it does the job.

:func:`prune_threads` gives one :class:`PruneReport` per thread, as
:func:`~deerflow.retention.prune.prune_thread` would, with the per-thread
start-up paid once:

* on Postgres every thread's transaction runs on one connection
  (:class:`SharedConnection`) instead of a new one per thread;
* a keep-last-1 prune without backup, protected ids or dry run, of threads
  LangGraph's ``PostgresSaver.prune(thread_ids, strategy="keep_latest")``
  prunes exactly as planned (:mod:`deerflow.retention.delegate`), is handed
  to that ``prune`` inside our transaction and verified before commit;
* any other keep-last prune first plans the threads with at most ``n``
  checkpoints from one statement over the batch
  (:mod:`deerflow.retention.batchfacts`): one it leaves as it is gets its
  ``nothing_to_prune`` report there, without a transaction of its own (what
  :func:`prune_thread` would have found, read and rolled back);
* a keep-last prune (not a dry run) of threads whose kept checkpoints need no
  new value is done for many threads at once, one transaction and one
  deleting statement per batch (:mod:`deerflow.retention.setbatch`);
* every other thread takes :func:`prune_thread`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.errors import StorageError
from deerflow.retention.batchfacts import read_batch_facts
from deerflow.retention.delegate import keep_latest_with_langgraph
from deerflow.retention.plan import plan_keep_last
from deerflow.retention.prune import check_rule, prune_thread
from deerflow.retention.report import PruneReport
from deerflow.retention.setbatch import keep_last_in_batches
from deerflow.storage.dialect import Dialect
from deerflow.storage.driver_errors import translated
from deerflow.storage.sessions import ConversionSession

__all__ = ["SharedConnection", "prune_threads"]


class SharedConnection:
    """One Postgres connection whose sessions (one transaction each) prune thread after thread.

    Use as a context manager (the connection is closed on exit). A connection
    that broke is replaced by the next :meth:`session`.

    Args:
        database: a Postgres :class:`DatabaseConfig`.
    """

    def __init__(self, database: DatabaseConfig):
        self.database = database
        self._conn: Any = None
        self._saver: Any = None

    def __enter__(self) -> SharedConnection:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._conn is not None and not self._conn.closed:
            self._conn.close()

    @contextmanager
    def session(self, *, write: bool, repeatable_read: bool = False) -> Iterator[ConversionSession]:
        """A :class:`ConversionSession` in a new transaction, rolled back on exit unless committed.

        Args:
            write: as :func:`deerflow.storage.sessions.open_session` (``False``: read only, one snapshot).
            repeatable_read: a writing transaction on one snapshot (what LangGraph's ``prune`` runs in).

        Raises:
            StorageError: connecting or beginning failed.
        """
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        with translated():
            if self._conn is None or self._conn.closed:
                self._conn = Dialect.POSTGRES.connect(self.database, autocommit=False)
                self._saver = PostgresSaver(self._conn)
            conn = self._conn
            conn.rollback()
            conn.read_only = False
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if repeatable_read and write else None
            Dialect.POSTGRES.begin(conn, write=write)
        session = ConversionSession(Dialect.POSTGRES, conn, self._saver)
        try:
            yield session
        finally:
            if not conn.closed:
                session.rollback()


def prune_threads(target: DatabaseConfig | Any, thread_ids: Iterable[str], rule: str, *, n: int | None = None,
                  protect: Iterable[str] = (), dry_run: bool = False, backup: bool = True, note: str = "",
                  max_attempts: int = 3) -> list[PruneReport]:
    """Prune each of ``thread_ids`` by ``rule``; see :func:`deerflow.retention.prune.prune_thread`.

    Returns:
        One report per distinct thread id, in the order given.

    Raises:
        ValueError: an unknown rule or a bad ``n`` (before anything is read).
    """
    check_rule(rule, n)
    ids = list(dict.fromkeys(thread_ids))
    protect = set(protect)
    options: dict[str, Any] = {"n": n, "protect": protect, "dry_run": dry_run, "backup": backup, "note": note,
                               "max_attempts": max_attempts}
    if not (isinstance(target, DatabaseConfig) and target.backend == "postgres"):
        return [prune_thread(target, t, rule, **options) for t in ids]
    reports: dict[str, PruneReport] = {}
    with SharedConnection(target) as shared:
        if rule == "keep_last" and n == 1 and not protect and not dry_run and not backup:
            reports.update(keep_latest_with_langgraph(shared, ids))
        elif rule == "keep_last" and dry_run:
            reports.update(_left_as_they_are(shared, ids, n or 1, protect))
        if rule == "keep_last" and not dry_run:
            reports.update(keep_last_in_batches(shared, [t for t in ids if t not in reports], n or 1, protect=protect,
                                                backup=backup, note=note))
        for t in ids:
            if t not in reports:
                reports[t] = prune_thread(target, t, rule, shared=shared, **options)
    return [reports[t] for t in ids]


def _left_as_they_are(shared: SharedConnection, thread_ids: list[str], n: int,
                      protect: set[str]) -> dict[str, PruneReport]:
    """``{thread_id: nothing_to_prune report}`` of the threads a keep-last ``n`` prune deletes nothing of.

    Planned on one read-only snapshot, from one statement over the threads with at most ``n`` checkpoints
    (a longer thread leaves one, at least, unless protected ids keep it: :func:`prune_thread` plans it); the
    others, and all when a read fails, are left out.
    """
    started = time.monotonic()
    try:
        with shared.session(write=False) as session:
            short = [r["thread_id"] for r in session.query(
                "SELECT thread_id FROM checkpoints WHERE thread_id = ANY(?) GROUP BY thread_id HAVING COUNT(*) <= ?",
                [thread_ids, n])]
            facts = read_batch_facts(session, short) if short else {}
    except StorageError:
        return {}
    reports = {}
    for t, fact in facts.items():
        if not fact.nodes:
            continue
        plan = plan_keep_last(fact.nodes, n, protect)
        if plan.deleted:
            continue
        report = PruneReport(thread_id=t, rule="keep_last", attempts=1, status="nothing_to_prune",
                             bytes_before=fact.stored_bytes, bytes_after=fact.stored_bytes)
        report.describe(plan, [])
        reports[t] = report
    for report in reports.values():
        report.duration_s = round((time.monotonic() - started) / len(thread_ids), 3)
    return reports
