"""Scale-test fixtures: seeded checkpoint databases on both backends, and the naive oracle.

``seeded`` is a module-scoped factory: ``seeded(backend, threads=..., mode=...)``
writes threads with :func:`deerflow.seed.seed_threads` into a fresh SQLite
file or Postgres database (dropped at the end of the module) and returns
``(database, report)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from benchmarks.naive_list import list_threads_naive
from deerflow import inventory
from deerflow.config.database_config import DatabaseConfig
from deerflow.seed import SeedPlan, SeedReport, seed_threads
from tests import fixtures_real
from tests.backends import new_database


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., tuple[DatabaseConfig, SeedReport]]]:
    """Factory writing seeded threads into a fresh database per call (module lifetime)."""
    databases: list[str] = []

    def make(backend: str, *, threads: int = 60, turns_min: int = 1, turns_max: int = 6, mode: str = "mixed",
             snapshot_frequency: int = 3, seed: str = "scale-tests", **plan: Any) -> tuple[DatabaseConfig, SeedReport]:
        database = new_database(backend, tmp_path_factory.mktemp(f"seed-{backend}"), databases, prefix="dfa_scale")
        report = seed_threads(database, SeedPlan(threads=threads, turns_min=turns_min, turns_max=turns_max,
                                                 mode=mode, snapshot_frequency=snapshot_frequency, seed=seed,
                                                 templates=plan.pop("templates", 8), **plan))
        return database, report

    yield make
    for name in databases:
        fixtures_real.drop_database(name)


def summary_facts(s: inventory.ThreadSummary) -> tuple:
    """Everything the naive aggregate also computes (storage fields excluded)."""
    return (s.thread_id, s.checkpoint_count, s.last_checkpoint_id, s.head_checkpoint_id, s.marker_count,
            s.counters_count, s.bare_count, s.head_marker, s.head_counters, s.mode, s.mode_evidence, s.thread_class)


def walk(saver: Any, *, limit: int = 1000, **filters: Any) -> list[inventory.ThreadSummary]:
    """Every page of :func:`deerflow.inventory.list_threads`, following the cursor."""
    out: list[inventory.ThreadSummary] = []
    cursor = None
    while True:
        page, cursor = inventory.list_threads(saver, limit=limit, cursor=cursor, **filters)
        out += page
        if cursor is None:
            return out


def naive_all(saver: Any) -> list[inventory.ThreadSummary]:
    """Every thread from the per-request ``GROUP BY`` (the oracle), newest update first."""
    rows, cursor = list_threads_naive(saver, limit=1000)
    while cursor:
        more, cursor = list_threads_naive(saver, limit=1000, cursor=cursor)
        rows += more
    return rows
