"""Fixtures for the jobs app: a small writable checkpoint database and a delta runtime on it.

Personas (``manager``, ``viewer``, ``outsider``...) live in ``tests/conftest.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import JobOptions, run_inline
from dashboard.runtime import DashboardRuntime
from deerflow.config.database_config import DatabaseConfig

#: Small threads of the real fixture kept in :func:`small_db` (seconds to convert, not minutes).
SMALL_THREADS = ["delta-f10-1t", "delta-f10-9t", "delta-f10-10t", "delta-f10-fork", "markerless-delta-f10-13t",
                 "migrated-full20-delta20", "full-short-3t", "full-rollback"]
DELTA_SMALL = [t for t in SMALL_THREADS if not t.startswith("full-")]


def shrink(database: DatabaseConfig, keep: list[str]) -> DatabaseConfig:
    """Delete every thread but ``keep`` from a private SQLite copy (so filters stay fast)."""
    marks = ",".join("?" * len(keep))
    with sqlite3.connect(Path(database.sqlite_dir) / "deerflow.db") as conn:
        for table in ("checkpoints", "writes"):
            conn.execute(f"DELETE FROM {table} WHERE thread_id NOT IN ({marks})", keep)
    return database


@pytest.fixture
def small_db(sqlite_fixture_db_rw: DatabaseConfig) -> DatabaseConfig:
    """A writable copy of the fixture SQLite holding only :data:`SMALL_THREADS`."""
    return shrink(sqlite_fixture_db_rw, SMALL_THREADS)


@pytest.fixture
def delta_rt(runtime_for, small_db) -> DashboardRuntime:
    """This process frozen in delta mode on :func:`small_db` (what a delta worker is)."""
    return runtime_for(small_db, "delta")


@pytest.fixture
def finished_job(delta_rt) -> Callable[..., ConversionJob]:
    """Factory: create a job through the service and run it inline to its end."""
    from dashboard.jobs import services

    def make(kind: str = "dry_run", selection: dict | None = None, **options) -> ConversionJob:
        job = services.create_job(None, kind, selection, JobOptions(launched_by="test", **options))
        return run_inline(job)

    return make


from tests.dashboard.jobs.deerflow_support import deerflow_db  # noqa: E402,F401 - fixture (DeerFlow's tables)
