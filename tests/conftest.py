"""Shared fixtures: the real DeerFlow data on SQLite and Postgres, and a clean mode freeze."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.runtime.checkpoint_mode import _reset_checkpoint_mode_freeze_for_tests
from tests import fixtures_real


@pytest.fixture(autouse=True)
def _fresh_mode_freeze() -> Iterator[None]:
    """Each test starts with an unfrozen process, as a fresh DeerFlow process would."""
    _reset_checkpoint_mode_freeze_for_tests()
    yield
    _reset_checkpoint_mode_freeze_for_tests()


@pytest.fixture(scope="session")
def manifest() -> dict:
    """The fixture manifest (the oracle)."""
    return fixtures_real.load_manifest()


@pytest.fixture(scope="session")
def sqlite_fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide copy of the fixture SQLite file as ``<dir>/deerflow.db``. Read-only use."""
    directory = tmp_path_factory.mktemp("sqlite-fixture")
    fixtures_real.restore_sqlite(directory)
    return directory


@pytest.fixture(scope="session")
def sqlite_fixture_db(sqlite_fixture_dir: Path) -> DatabaseConfig:
    """``database:`` block pointing at the session-wide fixture SQLite copy (do not write)."""
    return DatabaseConfig(backend="sqlite", sqlite_dir=str(sqlite_fixture_dir))


@pytest.fixture
def sqlite_fixture_db_rw(tmp_path: Path) -> DatabaseConfig:
    """A private, writable copy of the fixture SQLite database for one test."""
    fixtures_real.restore_sqlite(tmp_path / "data")
    return DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data"))


@pytest.fixture(scope="session")
def postgres_fixture_db() -> Iterator[DatabaseConfig]:
    """The fixture Postgres dump restored into a fresh database for this session (do not write)."""
    name, url = fixtures_real.create_database("dfa_fixture")
    try:
        fixtures_real.restore_postgres(url)
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)


@pytest.fixture
def postgres_fixture_db_rw() -> Iterator[DatabaseConfig]:
    """A private, writable restore of the fixture dump for one test."""
    name, url = fixtures_real.create_database("dfa_fixture_rw")
    try:
        fixtures_real.restore_postgres(url)
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)


@pytest.fixture
def empty_postgres_db() -> Iterator[DatabaseConfig]:
    """An empty Postgres database (LangGraph tables created by the saver's setup on demand)."""
    name, url = fixtures_real.create_database("dfa_empty")
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)
