"""Fixtures for the ``deerflow.convert`` tests: both backends, fresh or holding the real fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.deerflow.convert.support import open_saver

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatabaseConfig]:
    """A fresh, empty database on each backend, for hand-built threads (Postgres: dropped afterwards)."""
    if request.param == "sqlite":
        yield DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "sqlite"))
        return
    name, url = fixtures_real.create_database("dfa_convert")
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)


@pytest.fixture(params=BACKENDS)
def fixture_db(request: pytest.FixtureRequest) -> DatabaseConfig:
    """A private, writable copy of the real fixture on each backend (one per test).

    Opened once with the saver first: LangGraph's ``setup()`` migrates the
    fixture's SQLite file (written by langgraph-checkpoint-sqlite 3.1.1) by
    adding the ``writes.task_path`` column, as every newer saver does on
    first open, so row comparisons see the same columns before and after.
    """
    database = request.getfixturevalue(
        "sqlite_fixture_db_rw" if request.param == "sqlite" else "postgres_fixture_db_rw")
    with open_saver(database):
        pass
    return database
