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
"""

from __future__ import annotations

import queue
import random
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.savers import open_checkpointer, postgres_connect_kwargs, sqlite_checkpoint_path
from deerflow.seed.load import CloneSpec, PostgresBatch, PreparedTemplate, SqliteBatch
from deerflow.seed.template import Template, record_template

__all__ = ["MODES", "SeedPlan", "SeedReport", "SeededThread", "seed_threads"]

MODES = ("full", "delta", "mixed")
_MIXED_WEIGHTS = {"full": 40, "delta": 45, "migrated": 10, "markerless": 5}
_DAY_US = 86_400_000_000
#: Flush a batch once it holds this much payload (bytes), whatever its thread count.
_BATCH_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class SeedPlan:
    """What to write.

    Attributes:
        threads: threads to create (count >= 1).
        turns_min, turns_max: turns per thread, drawn uniformly (counts, 1 <= min <= max).
        mode: ``"full"``, ``"delta"`` or ``"mixed"``.
        snapshot_frequency: delta cadence (updates per ``_DeltaSnapshot``, >= 1).
        seed: makes the run reproducible (content, thread ids, times); random when ``None``.
        templates: distinct recorded shapes to copy from (count; fewer if ``threads`` is smaller).
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
        """Raise ``ValueError`` naming the first bad field and its value."""
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1; got {self.threads}")
        if not 1 <= self.turns_min <= self.turns_max:
            raise ValueError(f"need 1 <= turns_min <= turns_max; got {self.turns_min}..{self.turns_max}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if self.snapshot_frequency < 1:
            raise ValueError(f"snapshot_frequency must be >= 1; got {self.snapshot_frequency}")
        if self.templates < 1 or self.batch_threads < 1:
            raise ValueError(f"templates and batch_threads must be >= 1; got {self.templates}, {self.batch_threads}")
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
    dialect = "sqlite" if database.backend == "sqlite" else "postgres"
    return [
        record_template(key=f"{kind}-{i}", kind=kind, dialect=dialect, turns=plan.turns_max,
                        snapshot_frequency=plan.snapshot_frequency, seed=seed,
                        fork=rng.random() < plan.fork_rate, long_output_rate=plan.long_output_rate,
                        postgres_url=database.postgres_url, text_scale=plan.text_scale,
                        max_tool_rounds=plan.max_tool_rounds)
        for i, kind in enumerate(kinds)
    ]


def _specs(plan: SeedPlan, templates: list[Template], rng: random.Random):
    weights = _kinds(plan.mode)
    by_kind = {k: [t for t in templates if t.kind == k] for k in weights}
    now_us = time.time_ns() // 1000
    kinds, kind_weights = list(weights), list(weights.values())
    for _ in range(plan.threads):
        template = rng.choice(by_kind[rng.choices(kinds, kind_weights)[0]])
        turns = rng.randint(plan.turns_min, plan.turns_max)
        gap = rng.randint(30, 900) * 1_000_000
        length = turns * gap + sum(len(t.checkpoints) for t in template.turns[:turns]) * 2_000_000
        end = now_us - int(rng.random() * plan.span_days * _DAY_US) - 60_000_000
        tid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        yield template, CloneSpec(thread_id=tid, turns=turns, start_us=end - length, turn_gap_us=gap)


def seed_threads(database: DatabaseConfig, plan: SeedPlan,
                 progress: Callable[[SeedReport], None] | None = None) -> SeedReport:
    """Write ``plan.threads`` threads into ``database`` (tables created if missing).

    Args:
        database: a ``sqlite`` or ``postgres`` ``database:`` block.
        plan: what to write (validated first).
        progress: called with the running report after each batch.

    Returns:
        A :class:`SeedReport`.

    Raises:
        ValueError: a bad plan, or the ``memory`` backend (nothing would persist).
        RuntimeError: a template run wrote rows the recorder cannot copy exactly.
        psycopg.Error / sqlite3.Error: the database refused the rows (e.g. a thread id already taken).
    """
    plan.validate()
    if database.backend not in ("sqlite", "postgres"):
        raise ValueError("seeding needs a persistent backend (sqlite or postgres)")
    started = time.monotonic()
    seed = str(plan.seed if plan.seed is not None else uuid.uuid4().hex)
    with open_checkpointer(database, create=True):
        pass  # LangGraph's own setup(): tables and migrations
    templates = _record_all(database, plan, seed)
    prepared = {t.key: PreparedTemplate(t) for t in templates}
    report = SeedReport(record_seconds=round(time.monotonic() - started, 3))
    rng = random.Random(f"{seed}:threads")
    stride = max(1, plan.threads // 64)
    kinds: Counter[str] = Counter()
    with _Writer(database) as writer:
        batch = _new_batch(database)
        for i, (template, spec) in enumerate(_specs(plan, templates, rng)):
            batch.add(prepared[template.key], spec, rng)
            kinds[template.kind] += 1
            if i % stride == 0 and len(report.samples) < 64:
                report.samples.append(_sample(template, spec))
            full = (i + 1) % plan.batch_threads == 0 or batch.pending_bytes >= _BATCH_BYTES
            if full or i + 1 == plan.threads:
                writer.submit(batch)
                _account(report, batch, i + 1, kinds, started)
                if progress:
                    progress(report)
                batch = _new_batch(database)
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _sample(template: Template, spec: CloneSpec) -> SeededThread:
    last = template.turns[spec.turns - 1]
    checkpoints = sum(len(t.checkpoints) for t in template.turns[:spec.turns])
    return SeededThread(spec.thread_id, template.key, template.kind, spec.turns, checkpoints,
                        last.digest, last.message_count)


def _new_batch(database: DatabaseConfig) -> PostgresBatch | SqliteBatch:
    return SqliteBatch() if database.backend == "sqlite" else PostgresBatch()


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
    is re-raised by the next :meth:`submit` or on exit.
    """

    def __init__(self, database: DatabaseConfig):
        self.database = database
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="dfa-seed-writer", daemon=True)

    def __enter__(self) -> _Writer:
        self.conn = self._connect()
        self.thread.start()
        return self

    def _connect(self) -> Any:
        if self.database.backend == "sqlite":
            conn = sqlite3.connect(str(sqlite_checkpoint_path(self.database)), timeout=60, check_same_thread=False)
            conn.execute("PRAGMA synchronous = OFF")
            return conn
        import psycopg

        kwargs = postgres_connect_kwargs(self.database)
        kwargs["autocommit"] = False
        conn = psycopg.connect(self.database.postgres_url, **kwargs)
        conn.execute("SET synchronous_commit = off")
        return conn

    def _run(self) -> None:
        while (batch := self.queue.get()) is not None:
            if self.error is not None:
                continue
            try:
                if isinstance(batch, SqliteBatch):
                    with self.conn:
                        batch.insert_into(self.conn)
                else:
                    batch.copy_into(self.conn)
                    self.conn.commit()
            except BaseException as exc:  # noqa: BLE001 - handed to the submitting thread
                self.error = exc

    def submit(self, batch: Any) -> None:
        """Queue ``batch`` (blocks while another one waits)."""
        if self.error is not None:
            raise self.error
        self.queue.put(batch)

    def __exit__(self, *exc: Any) -> None:
        self.queue.put(None)
        self.thread.join()
        self.conn.close()
        if self.error is not None and exc[0] is None:
            raise self.error
