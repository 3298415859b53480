"""The seed's batch writer: a thread that commits whole batches (rows and their summary rows) in order."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import Counter
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.inventory.summary.rows import recompute
from deerflow.seed.load import CloneSpec, PostgresBatch, SqliteBatch
from deerflow.seed.plan import SeededThread, SeedReport
from deerflow.seed.template import Template
from deerflow.storage.dialect import Dialect
from deerflow.storage.sqlread import SqlReader, Tx

__all__: list[str] = []

#: Flush a batch once it holds this much payload (bytes), whatever its thread count.
_BATCH_BYTES = 64 * 1024 * 1024


def _sample(template: Template, spec: CloneSpec) -> SeededThread:
    last = template.turns[spec.turns - 1]
    checkpoints = sum(len(t.checkpoints) for t in template.turns[:spec.turns])
    return SeededThread(spec.thread_id, template.key, template.kind, spec.turns, checkpoints,
                        last.digest, last.message_count)


def _new_batch(dialect: Dialect) -> PostgresBatch | SqliteBatch:
    return PostgresBatch() if dialect.bulk_copy else SqliteBatch()


def _account(report: SeedReport, batch: Any, threads: int, kinds: Counter[str], started: float) -> None:
    report.threads = threads
    report.checkpoints += batch.counts[0]
    report.writes += batch.counts[1]
    report.blobs += batch.counts[2]
    report.bytes += batch.pending_bytes
    report.by_kind = dict(kinds)
    report.seconds = round(time.monotonic() - started, 3)


class _Writer:
    """Writes submitted batches on a background thread (one transaction each) while the next is built.

    The database, not Python, is the bottleneck of a bulk load; overlapping
    the two keeps both busy. At most one batch waits. An error in the writer
    is re-raised by the next :meth:`submit` or on exit. With a ``summary``
    reader, each transaction also recomputes the summary rows of the batch's
    threads (:func:`deerflow.inventory.summary.rows.recompute`) before committing.
    Leaving the block, even on an exception (Ctrl-C), first commits every
    batch submitted (at most two: the one being written and the one
    waiting); :attr:`committed` counts what committed.
    """

    def __init__(self, database: DatabaseConfig, summary: SqlReader | None = None):
        self.database = database
        self.dialect = Dialect.of_database(database, purpose="seeding")
        self.summary = summary
        self.summarized = 0
        self.summary_seconds = 0.0
        self.committed = SeedReport()
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="dfa-seed-writer", daemon=True)

    def __enter__(self) -> _Writer:
        self.conn = self._connect()
        self.thread.start()
        return self

    def _connect(self) -> Any:
        conn = self.dialect.connect(self.database, autocommit=False, timeout=60)
        if self.dialect is Dialect.SQLITE:
            conn.execute("PRAGMA synchronous = OFF")
            return conn
        conn.execute("SET synchronous_commit = off")
        conn.commit()
        return conn

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            if self.error is not None:
                continue
            batch, ids = item
            try:
                if isinstance(batch, SqliteBatch):
                    with self.conn:
                        batch.insert_into(self.conn)
                        self._summarize(ids)
                else:
                    batch.copy_into(self.conn)
                    self._summarize(ids)
                    self.conn.commit()
                self._count(batch, len(ids))
            except BaseException as exc:  # noqa: BLE001 - handed to the submitting thread
                self.error = exc
                with contextlib.suppress(Exception):  # SQLite's ``with conn`` rolled back already
                    self.conn.rollback()

    def _count(self, batch: Any, threads: int) -> None:
        done = self.committed
        done.threads += threads
        done.checkpoints += batch.counts[0]
        done.writes += batch.counts[1]
        done.blobs += batch.counts[2]
        done.bytes += batch.pending_bytes
        done.batches += 1
        done.summarized = self.summarized

    def _summarize(self, ids: list[str]) -> None:
        if self.summary is None:
            return
        started = time.monotonic()
        tx = Tx(self.dialect, self.conn)
        if self.dialect is Dialect.POSTGRES:
            # The batch's threads are a few hundred keys of the thread_id indexes, but tables being
            # bulk-loaded have stale or no statistics: the planner would scan each whole table once
            # per batch (quadratic over the load), in parallel and JIT-compiled. Measured at 20k
            # threads: 0.83 s per 500 threads without these, 0.11 s with. This transaction only.
            for setting in ("enable_seqscan = off", "jit = off", "max_parallel_workers_per_gather = 0"):
                tx.execute(f"SET LOCAL {setting}")
        self.summarized += recompute(tx, self.summary, ids)
        self.summary_seconds += time.monotonic() - started

    def submit(self, batch: Any, ids: list[str]) -> None:
        """Queue ``batch`` holding the threads ``ids`` (blocks while another one waits)."""
        if self.error is not None:
            raise self.error
        self.queue.put((batch, ids))

    def __exit__(self, *exc: Any) -> None:
        self.queue.put(None)
        self.thread.join()
        self.conn.close()
        if self.error is not None and exc[0] is None:
            raise self.error
