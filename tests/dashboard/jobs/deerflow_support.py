"""DeerFlow's own tables beside the real fixture, for the jobs' tests (both backends)."""

from __future__ import annotations

import pytest

from deerflow.config.database_config import DatabaseConfig
from tests.backends import BACKENDS
from tests.dashboard.jobs.conftest import SMALL_THREADS, shrink
from tests.deerflow.convert.support import open_saver
from tests.deerflow_schema import create_deerflow_tables, deerflow_connection

__all__ = ["deerflow_db", "reservation_rows"]


@pytest.fixture(params=BACKENDS)
def deerflow_db(request: pytest.FixtureRequest) -> DatabaseConfig:
    """The real fixture (SQLite: its small threads) with DeerFlow's threads_meta and runs in the same database."""
    if request.param == "sqlite":
        database = shrink(request.getfixturevalue("sqlite_fixture_db_rw"), SMALL_THREADS)
    else:
        database = request.getfixturevalue("postgres_fixture_db_rw")
    with open_saver(database):  # LangGraph's setup() migrates the fixture's tables first
        pass
    create_deerflow_tables(database)
    return database


def reservation_rows(database: DatabaseConfig) -> list[dict]:
    """This dashboard's and DeerFlow's ``checkpoint_write`` rows now in ``runs``."""
    with deerflow_connection(database) as conn:
        cur = conn.execute("SELECT run_id, thread_id, status FROM runs WHERE operation_kind = 'checkpoint_write'")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) if not isinstance(row, dict) else row for row in cur.fetchall()]


