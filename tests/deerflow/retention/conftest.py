"""Fixtures for the retention tests: a fresh store on memory, SQLite and Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real

ALL = [pytest.param("memory", id="memory"), pytest.param("sqlite", id="sqlite"),
       pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=ALL)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """What retention prunes: an ``InMemorySaver``, or a fresh SQLite / Postgres ``DatabaseConfig``."""
    if request.param == "memory":
        yield InMemorySaver()
        return
    if request.param == "sqlite":
        yield DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "sqlite"))
        return
    name, url = fixtures_real.create_database("dfa_retention")
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)


PERSISTENT = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=PERSISTENT)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatabaseConfig]:
    """A fresh SQLite or Postgres database (Postgres: dropped afterwards)."""
    if request.param == "sqlite":
        yield DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "sqlite"))
        return
    name, url = fixtures_real.create_database("dfa_retention")
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)


@pytest.fixture(params=PERSISTENT)
def fixture_db(request: pytest.FixtureRequest) -> DatabaseConfig:
    """A private, writable copy of the real fixture (opened once by the saver, so ``setup()`` has migrated it)."""
    from tests.deerflow.convert.support import open_saver

    database = request.getfixturevalue(
        "sqlite_fixture_db_rw" if request.param == "sqlite" else "postgres_fixture_db_rw")
    with open_saver(database):
        pass
    return database
