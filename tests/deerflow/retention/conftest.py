"""Fixtures for the retention tests: a fresh store on memory, SQLite and Postgres (``target``), and, from
:mod:`tests.backends`, a fresh database (``scratch_db``) and a writable copy of the real fixture
(``fixture_db``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.backends import WITH_MEMORY, fixture_db, fresh_database, scratch_db  # noqa: F401 - fixtures


@pytest.fixture(params=WITH_MEMORY)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """What retention prunes: an ``InMemorySaver``, or a fresh SQLite / Postgres ``DatabaseConfig``."""
    if request.param == "memory":
        yield InMemorySaver()
        return
    with fresh_database(request.param, tmp_path / "sqlite", prefix="dfa_retention") as database:
        yield database
