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
database's thread summary (:mod:`deerflow.inventory.summary`) is built, each batch also
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

from deerflow.seed.plan import (
    MAX_TEMPLATES,
    MAX_THREADS,
    MAX_TURNS,
    MODES,
    SeededThread,
    SeedInterrupted,
    SeedPlan,
    SeedReport,
    ThreadExistsError,
)
from deerflow.seed.run import describe_database, seed_threads
from deerflow.seed.target import SUMMARY_TABLES, SeedTargetError, analyze, check_target

__all__ = [
    "MAX_TEMPLATES",
    "MAX_THREADS",
    "MAX_TURNS",
    "MODES",
    "SUMMARY_TABLES",
    "SeedInterrupted",
    "SeedPlan",
    "SeedReport",
    "SeedTargetError",
    "SeededThread",
    "ThreadExistsError",
    "analyze",
    "check_target",
    "describe_database",
    "seed_threads",
]
