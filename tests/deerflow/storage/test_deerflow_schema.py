"""The test helper that stands DeerFlow's ``threads_meta`` and ``runs`` beside the checkpoints."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.backends import BACKENDS, fresh_database
from tests.deerflow_schema import (
    create_deerflow_tables,
    deerflow_connection,
    drop_deerflow_tables,
    insert_run,
    insert_thread_meta,
)


def _duplicate_errors() -> tuple[type[Exception], ...]:
    import sqlite3

    return sqlite3.IntegrityError, psycopg.errors.UniqueViolation


@pytest.mark.parametrize("backend", BACKENDS)
def test_it_enforces_one_active_run_per_thread(backend: str, tmp_path: Path):
    with fresh_database(backend, tmp_path, prefix="dfa_dfschema") as database:
        create_deerflow_tables(database)
        insert_thread_meta(database, "t1", user_id="alice", display_name="Trip plan")
        insert_run(database, "t1", status="success")
        insert_run(database, "t1", status="pending", operation_kind="checkpoint_write")
        with pytest.raises(_duplicate_errors()):
            insert_run(database, "t1", status="running")
        insert_run(database, "t2", status="running")  # another thread: admitted
        with deerflow_connection(database) as conn:
            cur = conn.execute("SELECT operation_kind, token_usage_by_model FROM runs "
                               "WHERE status = 'pending'")
            row = cur.fetchone()
            values = list(row.values()) if isinstance(row, dict) else list(row)
        assert values[0] == "checkpoint_write"
        drop_deerflow_tables(database)


@pytest.mark.postgres
def test_it_creates_the_tables_in_a_postgres_schema():
    name, url = fixtures_real.create_database("dfa_dfschema")
    try:
        database = DatabaseConfig(backend="postgres", postgres_url=url, postgres_schema="deer")
        create_deerflow_tables(database)
        insert_thread_meta(database, "t1", display_name="In deer")
        with psycopg.connect(url, autocommit=True) as conn:
            tables = {r[0]: r[1] for r in conn.execute(
                "SELECT table_name, table_schema FROM information_schema.tables "
                "WHERE table_name IN ('threads_meta', 'runs')")}
            nullable = dict(conn.execute(
                "SELECT column_name, is_nullable FROM information_schema.columns "
                "WHERE table_schema = 'deer' AND table_name = 'runs'").fetchall())
            index = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'uq_runs_thread_active'"
                                 ).fetchone()
        assert tables == {"threads_meta": "deer", "runs": "deer"}
        assert nullable["operation_kind"] == "NO" and nullable["lease_expires_at"] == "YES"
        assert index is not None and "UNIQUE" in index[0] and "'pending'" in index[0]
    finally:
        fixtures_real.drop_database(name)
