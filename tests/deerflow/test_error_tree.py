"""Every exception class ``deerflow`` defines is in its :class:`~deerflow.errors.DeerFlowError` tree,
and the tree in ``deerflow.errors``' docstring names every public one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sqlite3

import psycopg
import pytest

import deerflow
from deerflow import errors
from deerflow.errors import (
    DeerFlowError,
    NoSqlTablesError,
    StorageError,
    StoragePermissionError,
    StorageQueryError,
    StorageUnavailableError,
)


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """``{"module.Class": cls}`` for every exception class defined (not imported) in a deerflow module."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(deerflow.__path__, prefix="deerflow."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_the_walk_finds_the_package_errors():
    found = _defined_exceptions()
    # The walk reaches subpackages: these live in deerflow.convert, deerflow.seed and deerflow.inventory.cursors.
    for name in ("deerflow.convert.backups.BackupNotFoundError", "deerflow.seed.plan.ThreadExistsError",
                 "deerflow.seed.target.SeedTargetError", "deerflow.inventory.cursors.InvalidCursorError",
                 "deerflow.errors.StorageError"):
        assert name in found


#: Outside the tree by design (drawn in deerflow.errors' docstring with the reason).
BY_DESIGN = {
    "deerflow.storage.pool.ServerUnreachable": "a psycopg_pool.PoolTimeout, as LangGraph's saver callers expect",
    "deerflow.seed.plan.SeedInterrupted": "a KeyboardInterrupt, which except Exception must not catch",
}


def test_every_public_deerflow_exception_is_a_deerflow_error():
    """Private control-flow exceptions (a leading ``_``, never raised out of their module) are exempt."""
    outside = sorted(name for name, cls in _defined_exceptions().items()
                     if not name.rsplit(".", 1)[1].startswith("_") and not issubclass(cls, DeerFlowError))
    assert outside == sorted(BY_DESIGN)


def test_the_pool_outage_reaches_reader_callers_in_the_tree():
    from deerflow.storage.driver_errors import translated
    from deerflow.storage.pool import ServerUnreachable

    unreachable = ServerUnreachable("no connection", "Connection refused")
    with pytest.raises(StorageUnavailableError) as caught, translated():
        raise unreachable
    assert caught.value.driver_error is unreachable


def test_the_docstring_draws_every_public_exception():
    for name in _defined_exceptions():
        short = name.rsplit(".", 1)[1]
        if not short.startswith("_"):
            assert short in errors.__doc__, f"{name} is missing from the tree in deerflow.errors"


@pytest.mark.parametrize(("driver_error", "expected"), [
    (sqlite3.OperationalError("database is locked"), StorageUnavailableError),
    (sqlite3.OperationalError("disk I/O error"), StorageUnavailableError),
    (sqlite3.DatabaseError("file is not a database"), StorageUnavailableError),
    (sqlite3.OperationalError("attempt to write a readonly database"), StoragePermissionError),
    (sqlite3.OperationalError('near "SELEC": syntax error'), StorageQueryError),
    (sqlite3.IntegrityError("UNIQUE constraint failed: t.a"), StorageQueryError),
    (sqlite3.ProgrammingError("Cannot operate on a closed database."), StorageQueryError),
    (psycopg.OperationalError("connection refused"), StorageUnavailableError),
    (psycopg.errors.InsufficientPrivilege("permission denied"), StoragePermissionError),
    (psycopg.errors.ReadOnlySqlTransaction("read-only"), StoragePermissionError),
    (psycopg.errors.UndefinedTable('relation "checkpoints" does not exist'), StorageQueryError),
])
def test_driver_errors_are_translated_by_kind(driver_error, expected):
    from deerflow.storage.driver_errors import translated

    with pytest.raises(StorageError) as caught, translated():
        raise driver_error
    assert type(caught.value) is expected
    assert caught.value.__cause__ is driver_error and caught.value.driver_error is driver_error
    assert str(caught.value) == str(driver_error)


def test_a_real_sqlite_error_leaves_the_reader_translated(tmp_path):
    from langgraph.checkpoint.sqlite import SqliteSaver

    from deerflow.storage.sqlread import reader_for

    conn = sqlite3.connect(tmp_path / "deerflow.db", check_same_thread=False)
    try:
        reader = reader_for(SqliteSaver(conn))
        with pytest.raises(StorageQueryError, match="no such table: checkpoints") as caught:
            reader.query("SELECT COUNT(*) AS n FROM checkpoints")
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    finally:
        conn.close()


def test_a_memory_saver_has_no_sql_tables():
    from langgraph.checkpoint.memory import InMemorySaver

    from deerflow.storage.sqlread import has_sql_tables, reader_for

    saver = InMemorySaver()
    assert has_sql_tables(saver) is False
    with pytest.raises(NoSqlTablesError, match="InMemorySaver has no SQL tables") as caught:
        reader_for(saver)
    assert isinstance(caught.value, TypeError)  # callers written before NoSqlTablesError keep working
