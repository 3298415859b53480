"""Scale data generator: many realistic DeerFlow threads, written fast, exactly as LangGraph writes them.

``seed_threads(database, SeedPlan(threads=100_000, turns_min=1, turns_max=12, mode="mixed"))``

1. records a few *templates* (:mod:`deerflow.seed.template`): real runs of a
   scripted DeerFlow-shaped agent (:mod:`deerflow.seed.script`: tool calls,
   long outputs sometimes, a title, todos, occasional forks) through a real
   LangGraph saver of the target's dialect, rows kept per turn;
2. writes every requested thread as a copy of one template's first ``n``
   turns (``turns_min <= n <= turns_max``) with a new thread id, new
   time-ordered checkpoint ids and recomputed task ids
   (:mod:`deerflow.seed.load`), in batches: Postgres ``COPY (FORMAT BINARY)``,
   SQLite ``executemany``.

Modes: ``full`` and ``delta`` write only that kind; ``mixed`` writes full
(40 %), delta (45 %), migrated full-then-delta (10 %) and marker-less delta
(5 %) threads. Every thread's expected head digest is known
(:attr:`SeedReport.samples` keeps some), which is how the tests prove the
rows read back through LangGraph as intended.

Thread ids depend on the seed alone (a UUIDv4 sequence drawn from it). Before
writing anything, every id is looked up (one query per 900 ids): an id that
already has checkpoints raises :class:`ThreadExistsError`, so a second run with
the same seed never merges a copy into the first run's threads. When the
database's thread summary (:mod:`deerflow.summary`) is built, each batch also
recomputes the summary rows of exactly its threads in the batch's own
transaction: seeded ids are older than the summary's watermark, so a
watermark refresh would never see them.

Before anything runs, :func:`deerflow.seed.target.check_target` checks the
target (a few seconds at most: an unreachable server, a missing database or
schema, a ``sqlite_dir`` in a directory that does not exist); after the last
batch, the loaded tables are analyzed (:func:`deerflow.seed.target.analyze`).
Batches commit whole: an interrupted seed (Ctrl-C, :class:`SeedInterrupted`)
commits the batches it reported, each with its summary rows, and stops; its
ids are then taken, so it is re-run with another seed.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.dialect import Dialect
from deerflow.errors import DeerFlowError
from deerflow.savers import open_checkpointer, sqlite_checkpoint_path
from deerflow.seed.load import CloneSpec, PostgresBatch, PreparedTemplate, SqliteBatch
from deerflow.seed.target import SeedTargetError, analyze, check_target, loaded_tables
from deerflow.seed.template import Template, record_template
from deerflow.sqlread import SqlReader, Tx, reader_for, table_exists
from deerflow.summary import access as summary_access
from deerflow.summary.rows import recompute

__all__ = ["MAX_TEMPLATES", "MAX_THREADS", "MAX_TURNS", "MODES", "SeedInterrupted", "SeedPlan", "SeedReport",
           "SeedTargetError", "SeededThread", "ThreadExistsError", "check_target", "describe_database", "seed_threads"]

MODES = ("full", "delta", "mixed")
_MIXED_WEIGHTS = {"full": 40, "delta": 45, "migrated": 10, "markerless": 5}
_DAY_US = 86_400_000_000
#: Flush a batch once it holds this much payload (bytes), whatever its thread count.
_BATCH_BYTES = 64 * 1024 * 1024
#: Upper bounds of a plan (counts). Recording a template costs time and memory that grow faster
#: than its turns (the whole history is rewritten at every snapshot), so callers without
#: ``text_scale`` (``manage.py seed_threads``) bound turns much lower.
MAX_THREADS = 10_000_000
MAX_TURNS = 5000
MAX_TEMPLATES = 1000
#: Thread ids looked up per query by the existence check (under SQLite's historical 999-parameter limit).
_CHECK_IDS = 900


@dataclass(frozen=True)
class SeedPlan:
    """What to write.

    Attributes:
        threads: threads to create (count, 1..:data:`MAX_THREADS`).
        turns_min, turns_max: turns per thread, drawn uniformly (counts, 1 <= min <= max <= :data:`MAX_TURNS`).
        mode: ``"full"``, ``"delta"`` or ``"mixed"``.
        snapshot_frequency: delta cadence (updates per ``_DeltaSnapshot``, >= 1).
        seed: makes the run reproducible (content, thread ids, times); random when ``None``.
        templates: distinct recorded shapes to copy from (count, 1..:data:`MAX_TEMPLATES`; fewer if
            ``threads`` is smaller).
        fork_rate: fraction of templates with a fork turn (0..1).
        long_output_rate: probability that a tool output is 8-32 KB (0..1).
        text_scale: multiplies every other message length (1.0: realistic prose; smaller for
            benchmarks whose output grows with the square of the history, like conversion to full).
        max_tool_rounds: at most this many tool rounds per turn (0..3; 0: plain question/answer turns).
        span_days: threads end at random times within this many days before now.
        batch_threads: threads per COPY/transaction (count; a batch is also flushed at 64 MB).
    """

    threads: int
    turns_min: int
    turns_max: int
    mode: str = "mixed"
    snapshot_frequency: int = 10
    seed: str | int | None = None
    templates: int = 24
    fork_rate: float = 0.15
    long_output_rate: float = 0.05
    text_scale: float = 1.0
    max_tool_rounds: int = 3
    span_days: float = 90.0
    batch_threads: int = 1000

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field, its value and the bound it breaks."""
        if not 1 <= self.threads <= MAX_THREADS:
            raise ValueError(f"threads must be >= 1 and <= {MAX_THREADS:,}; got {self.threads}")
        if not 1 <= self.turns_min <= self.turns_max:
            raise ValueError(f"need 1 <= turns_min <= turns_max; got {self.turns_min}..{self.turns_max}")
        if self.turns_max > MAX_TURNS:
            raise ValueError(f"turns_max must be <= {MAX_TURNS}; got {self.turns_max}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if self.snapshot_frequency < 1:
            raise ValueError(f"snapshot_frequency must be >= 1; got {self.snapshot_frequency}")
        if not 1 <= self.templates <= MAX_TEMPLATES or self.batch_threads < 1:
            raise ValueError(f"need 1 <= templates <= {MAX_TEMPLATES} and batch_threads >= 1; got {self.templates}, "
                             f"{self.batch_threads}")
        if not 0 <= self.max_tool_rounds <= 3 or self.text_scale <= 0:
            raise ValueError(f"need 0 <= max_tool_rounds <= 3 and text_scale > 0; got {self.max_tool_rounds}, "
                             f"{self.text_scale}")


@dataclass(frozen=True)
class SeededThread:
    """One written thread and what LangGraph must read back at its head.

    Attributes:
        thread_id: the thread.
        template: the template key it copies.
        kind: ``full``, ``delta``, ``migrated`` or ``markerless``.
        turns: turns written (count).
        checkpoints: checkpoint rows written (count).
        head_digest: canonical messages digest of the head state the run returned.
        message_count: messages in that state (count).
    """

    thread_id: str
    template: str
    kind: str
    turns: int
    checkpoints: int
    head_digest: str
    message_count: int


@dataclass
class SeedReport:
    """What :func:`seed_threads` wrote.

    Attributes:
        threads, checkpoints, writes, blobs: rows written (counts; blobs are Postgres only).
        bytes: payload bytes sent to the database (bytes).
        seconds: wall time, recording included (seconds).
        record_seconds: of which recording templates (seconds).
        by_kind: threads per template kind (counts).
        samples: every ``len/64``-th thread with its expected head (at most 64).
        summarized: threads whose summary rows were written in their batch's transaction (count;
            0 when the summary was not built yet -- its first refresh builds every row -- or
            with ``summarize=False``).
        summary_seconds: of ``seconds``, spent recomputing those rows (seconds).
        batches: transactions committed (count; each holds whole threads and their summary rows).
        analyze_seconds: of ``seconds``, spent analyzing the loaded tables (seconds).
    """

    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0
    bytes: int = 0
    seconds: float = 0.0
    record_seconds: float = 0.0
    by_kind: dict[str, int] = field(default_factory=dict)
    samples: list[SeededThread] = field(default_factory=list)
    summarized: int = 0
    summary_seconds: float = 0.0
    batches: int = 0
    analyze_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        out = dict(self.__dict__)
        out["samples"] = [s.__dict__ for s in self.samples]
        return out


def _kinds(mode: str) -> dict[str, int]:
    return {mode: 1} if mode != "mixed" else dict(_MIXED_WEIGHTS)


def _record_all(database: DatabaseConfig, plan: SeedPlan, seed: str) -> list[Template]:
    weights = _kinds(plan.mode)
    count = max(len(weights), min(plan.templates, plan.threads))
    rng = random.Random(f"{seed}:templates")
    # Kinds proportional to their weight, every kind at least once.
    kinds = list(weights)
    while len(kinds) < count:
        kinds.append(max(weights, key=lambda k: weights[k] / (1 + kinds.count(k))))
    dialect = Dialect.of_database(database, purpose="seeding")
    return [
        record_template(key=f"{kind}-{i}", kind=kind, dialect=dialect, turns=plan.turns_max,
                        snapshot_frequency=plan.snapshot_frequency, seed=seed,
                        fork=rng.random() < plan.fork_rate, long_output_rate=plan.long_output_rate,
                        postgres_url=database.postgres_url, text_scale=plan.text_scale,
                        max_tool_rounds=plan.max_tool_rounds)
        for i, kind in enumerate(kinds)
    ]


def _thread_ids(seed: str, count: int) -> Iterator[str]:
    """The ``count`` thread ids of ``seed`` (UUIDv4 strings; the same seed always gives the same sequence)."""
    rng = random.Random(f"{seed}:thread-ids")
    for _ in range(count):
        yield str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _specs(plan: SeedPlan, templates: list[Template], rng: random.Random, seed: str):
    weights = _kinds(plan.mode)
    by_kind = {k: [t for t in templates if t.kind == k] for k in weights}
    now_us = time.time_ns() // 1000
    kinds, kind_weights = list(weights), list(weights.values())
    for tid in _thread_ids(seed, plan.threads):
        template = rng.choice(by_kind[rng.choices(kinds, kind_weights)[0]])
        turns = rng.randint(plan.turns_min, plan.turns_max)
        gap = rng.randint(30, 900) * 1_000_000
        length = turns * gap + sum(len(t.checkpoints) for t in template.turns[:turns]) * 2_000_000
        end = now_us - int(rng.random() * plan.span_days * _DAY_US) - 60_000_000
        yield template, CloneSpec(thread_id=tid, turns=turns, start_us=end - length, turn_gap_us=gap)


class ThreadExistsError(DeerFlowError, ValueError):
    """A thread id the plan would write already has checkpoints in the target database.

    Attributes:
        thread_id: the first such id.
        where: the database, for messages (:func:`describe_database`).
    """

    def __init__(self, thread_id: str, where: str):
        self.thread_id = thread_id
        self.where = where
        super().__init__(f"thread {thread_id} already exists in {where}: use another seed "
                         "(seeding never adds checkpoints to existing threads)")


class SeedInterrupted(KeyboardInterrupt):
    """The seed was interrupted (Ctrl-C): the batches committed before stay, nothing else was written.

    Raised by :func:`seed_threads` in place of the ``KeyboardInterrupt``
    (a subclass, so callers that do not know it still stop). Every batch
    already handed to the writer -- every batch a ``progress`` report
    counted, at most two of them still uncommitted -- is committed first;
    nothing else is written. Each committed batch holds whole threads and,
    with a built summary, their summary rows. The seed's ids of the
    committed threads now exist, so the same seed is refused next time.

    Attributes:
        report: what was committed (:class:`SeedReport`: ``threads``, ``checkpoints``, ``writes``,
            ``blobs``, ``bytes``, ``batches``, ``summarized``; ``samples`` and ``by_kind`` empty).
        where: the database, for messages (:func:`describe_database`).
    """

    def __init__(self, report: SeedReport, where: str):
        super().__init__(f"seed interrupted after {report.threads} threads in {report.batches} batches "
                         f"were committed to {where}")
        self.report = report
        self.where = where


def describe_database(database: DatabaseConfig) -> str:
    """A short, password-free name of ``database`` for messages.

    Returns:
        ``"SQLite file <path>"`` or ``"Postgres database <name> on <host>:<port>"``.
    """
    if database.backend == "sqlite":
        return f"SQLite file {sqlite_checkpoint_path(database)}"
    import psycopg

    info = psycopg.conninfo.conninfo_to_dict(database.postgres_url or "")
    return (f"Postgres database {info.get('dbname', '?')} on {info.get('host', 'localhost')}:"
            f"{info.get('port', 5432)}")


def _refuse_existing(conn: Any, dialect: str, database: DatabaseConfig, seed: str, count: int) -> None:
    """Raise :class:`ThreadExistsError` if any of the plan's thread ids has a checkpoint (one query per 900 ids)."""
    tx = Tx(dialect, conn)
    ids = _thread_ids(seed, count)
    while chunk := list(itertools.islice(ids, _CHECK_IDS)):
        where, params = tx.dialect.in_list("thread_id", chunk)
        rows = tx.query(f"SELECT thread_id FROM checkpoints WHERE {where} LIMIT 1", params)
        if rows:
            raise ThreadExistsError(rows[0]["thread_id"], describe_database(database))


def _summary_built(saver: Any) -> bool:
    """True when the database has a built thread summary this role may write (migrated first).

    Probes before migrating: a database without summary tables gets none from
    the seeder (the first refresh creates and builds them after the load, so
    the bulk load does not maintain the summary's index on ``checkpoints``).
    """
    reader = reader_for(saver)
    if not table_exists(reader, "dfa_summary_state") or summary_access(saver) != "write":
        return False
    return reader.query("SELECT watermark FROM dfa_summary_state WHERE id = 1")[0]["watermark"] is not None


def seed_threads(database: DatabaseConfig, plan: SeedPlan,
                 progress: Callable[[SeedReport], None] | None = None, *, summarize: bool = True,
                 analyze_tables: bool = True) -> SeedReport:
    """Write ``plan.threads`` threads into ``database`` (tables created if missing).

    The target is checked first (:func:`check_target`). Nothing is written
    when a thread id of the plan already exists. With ``summarize`` and a
    built thread summary, every batch recomputes the summary rows of its own
    threads in its transaction (the rows and their summary commit together);
    otherwise the summary is left alone. Last, the tables written are
    analyzed (planner statistics; see :mod:`deerflow.seed.target`).

    Args:
        database: a ``sqlite`` or ``postgres`` ``database:`` block.
        plan: what to write (validated first).
        progress: called with the running report after each batch (and once, with 0 threads,
            after the templates are recorded).
        summarize: keep a built summary current as batches commit (``False``: leave it, e.g.
            when the caller rebuilds it anyway; seeded ids are older than the summary's
            watermark, so only a full refresh would then find them).
        analyze_tables: ``ANALYZE`` the tables written at the end (LangGraph's, and the summary's
            when ``summarized``).

    Returns:
        A :class:`SeedReport`.

    Raises:
        ValueError: a bad plan, or the ``memory`` backend (nothing would persist).
        SeedTargetError: (a ``ValueError``) ``sqlite_dir`` is in a directory that does not exist, or
            the Postgres schema does not exist; nothing was written.
        psycopg.OperationalError: the Postgres server or database cannot be reached (within
            :data:`deerflow.seed.target.CONNECT_TIMEOUT_S`); nothing was written.
        SeedInterrupted: (a ``KeyboardInterrupt``) interrupted; carries what was committed.
        ThreadExistsError: (a ``ValueError``) a thread id of the plan already has checkpoints;
            nothing was written. Ids depend on ``plan.seed`` only. (A thread another writer
            creates between the check and the load is not detected.)
        RuntimeError: a template run wrote rows the recorder cannot copy exactly.
        psycopg.Error / sqlite3.Error: the database refused the rows.
    """
    plan.validate()
    check_target(database)
    started = time.monotonic()
    seed = str(plan.seed if plan.seed is not None else uuid.uuid4().hex)
    writer: _Writer | None = None
    try:
        with open_checkpointer(database, create=True) as saver:  # LangGraph's own setup(): tables and migrations
            reader = reader_for(saver) if summarize and _summary_built(saver) else None
            with _Writer(database, reader) as writer:
                _refuse_existing(writer.conn, writer.dialect, database, seed, plan.threads)
                writer.conn.commit()  # no transaction stays open while templates are recorded
                templates = _record_all(database, plan, seed)
                prepared = {t.key: PreparedTemplate(t) for t in templates}
                report = SeedReport(record_seconds=round(time.monotonic() - started, 3))
                if progress:
                    progress(report)
                _write_all(writer, plan, templates, prepared, report, seed, started, progress)
        report.summarized, report.summary_seconds = writer.summarized, round(writer.summary_seconds, 3)
        report.batches = writer.committed.batches
        if analyze_tables:
            tables = loaded_tables(writer.dialect, summary=report.summarized > 0)
            report.analyze_seconds = round(analyze(database, tables), 3)
    except KeyboardInterrupt as exc:
        committed = writer.committed if writer is not None else SeedReport()
        committed.seconds = round(time.monotonic() - started, 3)
        raise SeedInterrupted(committed, describe_database(database)) from exc
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _write_all(writer: _Writer, plan: SeedPlan, templates: list[Template], prepared: dict[str, PreparedTemplate],
               report: SeedReport, seed: str, started: float,
               progress: Callable[[SeedReport], None] | None) -> None:
    rng = random.Random(f"{seed}:threads")
    stride = max(1, plan.threads // 64)
    kinds: Counter[str] = Counter()
    batch, ids = _new_batch(writer.dialect), []
    for i, (template, spec) in enumerate(_specs(plan, templates, rng, seed)):
        batch.add(prepared[template.key], spec, rng)
        ids.append(spec.thread_id)
        kinds[template.kind] += 1
        if i % stride == 0 and len(report.samples) < 64:
            report.samples.append(_sample(template, spec))
        full = (i + 1) % plan.batch_threads == 0 or batch.pending_bytes >= _BATCH_BYTES
        if full or i + 1 == plan.threads:
            writer.submit(batch, ids)
            _account(report, batch, i + 1, kinds, started)
            if progress:
                progress(report)
            batch, ids = _new_batch(writer.dialect), []


def _sample(template: Template, spec: CloneSpec) -> SeededThread:
    last = template.turns[spec.turns - 1]
    checkpoints = sum(len(t.checkpoints) for t in template.turns[:spec.turns])
    return SeededThread(spec.thread_id, template.key, template.kind, spec.turns, checkpoints,
                        last.digest, last.message_count)


def _new_batch(dialect: Dialect) -> PostgresBatch | SqliteBatch:
    return PostgresBatch() if dialect is Dialect.POSTGRES else SqliteBatch()


def _account(report: SeedReport, batch: Any, threads: int, kinds: Counter, started: float) -> None:
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
    threads (:func:`deerflow.summary.rows.recompute`) before committing.
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
