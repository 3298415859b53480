"""The checkpoint-database backends the tests run on, fresh databases on them, and the fixtures built on both.

One list of backends and one way to make a database for a test, instead of a copy per conftest:

* :data:`BACKENDS`: SQLite, and Postgres (marked ``postgres``); :data:`WITH_MEMORY` puts LangGraph's in-memory
  saver first. Their ids (``sqlite``, ``postgres``, ``memory``) are the test ids.
* :func:`new_database` / :func:`fresh_database`: an empty SQLite directory or a new Postgres database (named
  ``<prefix>_<uuid>``, dropped afterwards); :func:`postgres_database` also restores the real fixture into it.
* Fixtures, imported by the conftests that offer them (a fixture is registered where it is imported):
  ``tests/conftest.py`` offers the real fixture everywhere (``sqlite_fixture_dir``, ``sqlite_fixture_db``,
  ``sqlite_fixture_db_rw``, ``postgres_fixture_db``, ``postgres_fixture_db_rw``, ``empty_postgres_db``,
  ``fixture_backend``); ``tests/deerflow/convert`` and ``tests/deerflow/retention`` offer :func:`scratch_db`
  (a fresh, empty database per backend; named so it never shadows pytest-django's ``db`` fixture) and
  :func:`fixture_db`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real

SQLITE = pytest.param("sqlite", id="sqlite")
POSTGRES = pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)
MEMORY = pytest.param("memory", id="memory")

#: The persistent backends, for ``@pytest.mark.parametrize("backend", BACKENDS)`` or fixture ``params``.
BACKENDS = [SQLITE, POSTGRES]
#: The in-memory saver, then :data:`BACKENDS`.
WITH_MEMORY = [MEMORY, SQLITE, POSTGRES]


def new_database(backend: str, directory: Path, cleanup: list[str], *,
                 prefix: str = "dfa_test") -> DatabaseConfig:
    """An empty checkpoint database on ``backend`` (no tables: the saver's ``setup()`` creates them).

    Args:
        backend: ``"sqlite"`` or ``"postgres"``.
        directory: the SQLite directory (its ``deerflow.db`` is created on first open); unused for Postgres.
        cleanup: the new Postgres database's name is appended here; the caller drops each name with
            :func:`tests.fixtures_real.drop_database`.
        prefix: the Postgres database name's prefix (``<prefix>_<10 hex digits>``).

    Returns:
        The ``database:`` block of the new database.

    Raises:
        ValueError: ``backend`` is neither ``sqlite`` nor ``postgres``.
        psycopg.Error: the Postgres server refused ``CREATE DATABASE``.
    """
    if backend == "sqlite":
        return DatabaseConfig(backend="sqlite", sqlite_dir=str(directory))
    if backend != "postgres":
        raise ValueError(f"unknown backend {backend!r} (expected 'sqlite' or 'postgres')")
    name, url = fixtures_real.create_database(prefix)
    cleanup.append(name)
    return DatabaseConfig(backend="postgres", postgres_url=url)


@contextmanager
def fresh_database(backend: str, directory: Path, *, prefix: str = "dfa_test") -> Iterator[DatabaseConfig]:
    """:func:`new_database` as a context: the Postgres database is dropped on exit (even on error)."""
    cleanup: list[str] = []
    try:
        yield new_database(backend, directory, cleanup, prefix=prefix)
    finally:
        for name in cleanup:
            fixtures_real.drop_database(name)


@contextmanager
def postgres_database(prefix: str, *, restore: bool) -> Iterator[DatabaseConfig]:
    """A new Postgres database (the fixture dump restored into it when ``restore``), dropped afterwards."""
    name, url = (fixtures_real.create_fixture_database if restore else fixtures_real.create_database)(prefix)
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)


# -- the real fixture on each backend (tests/conftest.py)

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
    with postgres_database("dfa_fixture", restore=True) as database:
        yield database


@pytest.fixture
def postgres_fixture_db_rw() -> Iterator[DatabaseConfig]:
    """A private, writable restore of the fixture dump for one test."""
    with postgres_database("dfa_fixture_rw", restore=True) as database:
        yield database


@pytest.fixture
def empty_postgres_db() -> Iterator[DatabaseConfig]:
    """An empty Postgres database (LangGraph tables created by the saver's setup on demand)."""
    with postgres_database("dfa_empty", restore=False) as database:
        yield database


@pytest.fixture(params=BACKENDS)
def fixture_backend(request: pytest.FixtureRequest) -> tuple[str, DatabaseConfig]:
    """``(backend name, database block)`` of the read-only real fixture, once per backend."""
    return request.param, request.getfixturevalue(f"{request.param}_fixture_db")


# -- fresh and writable databases per backend (tests/deerflow/convert, tests/deerflow/retention)

@pytest.fixture(params=BACKENDS)
def scratch_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatabaseConfig]:
    """A fresh, empty database on each backend, for hand-built threads (Postgres: dropped afterwards).

    The Postgres database is named after the test's folder (``dfa_convert_…``, ``dfa_retention_…``).
    """
    prefix = f"dfa_{request.path.parent.name}"
    with fresh_database(request.param, tmp_path / "sqlite", prefix=prefix) as database:
        yield database


@pytest.fixture(params=BACKENDS)
def fixture_db(request: pytest.FixtureRequest) -> DatabaseConfig:
    """A private, writable copy of the real fixture on each backend (one per test).

    Opened once with the saver first: LangGraph's ``setup()`` migrates the
    fixture's SQLite file (written by langgraph-checkpoint-sqlite 3.1.1) by
    adding the ``writes.task_path`` column, as every newer saver does on
    first open, so row comparisons see the same columns before and after.
    """
    from tests.deerflow.convert.support import open_saver

    database = request.getfixturevalue(
        "sqlite_fixture_db_rw" if request.param == "sqlite" else "postgres_fixture_db_rw")
    with open_saver(database):
        pass
    return database
