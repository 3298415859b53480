"""The :class:`deerflow.storage.Dialect` members the converter, retention and seeding branch on, on both dialects.

Each member answers what a module used to decide by comparing the dialect's name; the expected values are
the SQL and flags those modules issued before (the SQL text must stay byte for byte the same).
"""

from __future__ import annotations

import pytest

from deerflow.storage.dialect import Dialect

SQLITE, POSTGRES = Dialect.SQLITE, Dialect.POSTGRES


def test_a_dialect_still_equals_its_name() -> None:
    assert SQLITE == "sqlite" and POSTGRES == "postgres"
    assert Dialect("postgres") is POSTGRES
    assert "sqlite" in tuple(Dialect) and "memory" not in tuple(Dialect)


@pytest.mark.parametrize(("dialect", "columns"), [
    (SQLITE, "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path"),
    (POSTGRES, "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob"),
])
def test_write_columns_list_langgraphs_writes_table_in_order(dialect: Dialect, columns: str) -> None:
    assert dialect.write_columns == columns
    assert dialect.write_value_column in dialect.write_columns.split(", ")


@pytest.mark.parametrize(("dialect", "expected"), [(SQLITE, False), (POSTGRES, True)])
def test_json_columns(dialect: Dialect, expected: bool) -> None:
    assert dialect.json_columns is expected


def test_json_param_is_the_stored_bytes_on_sqlite() -> None:
    raw = b'{"step": 1}'
    assert SQLITE.json_param(raw) is raw


def test_json_param_is_jsonb_on_postgres() -> None:
    from psycopg.types.json import Jsonb

    bound = POSTGRES.json_param({"step": 1})
    assert isinstance(bound, Jsonb) and bound.obj == {"step": 1}


@pytest.mark.parametrize(("dialect", "expected"), [(SQLITE, False), (POSTGRES, True)])
def test_bulk_copy(dialect: Dialect, expected: bool) -> None:
    assert dialect.bulk_copy is expected


@pytest.mark.parametrize(("dialect", "expected"), [(SQLITE, False), (POSTGRES, True)])
def test_pipelines(dialect: Dialect, expected: bool) -> None:
    assert dialect.pipelines is expected


@pytest.mark.parametrize(("dialect", "expected"), [(SQLITE, False), (POSTGRES, True)])
def test_has_blob_table(dialect: Dialect, expected: bool) -> None:
    assert dialect.has_blob_table is expected
    assert ("checkpoint_blobs" in dialect.saver_tables) is expected


@pytest.mark.parametrize(("dialect", "table", "value"), [
    (SQLITE, "writes", "value"), (POSTGRES, "checkpoint_writes", "blob")])
def test_writes_table_and_value_column(dialect: Dialect, table: str, value: str) -> None:
    assert dialect.writes_table == table and dialect.write_value_column == value
    assert dialect.write_bytes(None) == f"COALESCE(LENGTH({value}), 0)"
