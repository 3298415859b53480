"""On SQLite only a real outage is a 503: a SQL bug (``sqlite3.DatabaseError`` includes
``ProgrammingError`` and ``IntegrityError``) stays a bug (:mod:`dashboard.errors.outages`).

The errors are raised by a real SQLite file, raw (as LangGraph's saver lets them
out) and translated by ``deerflow``'s reader (:class:`deerflow.errors.StorageError`).
"""

from __future__ import annotations

import sqlite3

import pytest

from dashboard.errors.outages import describe_outage, is_outage
from deerflow.errors import StorageQueryError, StorageUnavailableError
from deerflow.storage.sqlread import Tx


@pytest.fixture
def conn(tmp_path):
    c = sqlite3.connect(tmp_path / "deerflow.db", isolation_level=None, timeout=0.1, check_same_thread=False)
    c.execute("CREATE TABLE t (a INTEGER PRIMARY KEY)")
    c.execute("INSERT INTO t VALUES (1)")
    yield c
    c.close()


def _raised(fn) -> BaseException:
    with pytest.raises(Exception) as caught:
        fn()
    return caught.value


BUGS = {
    "syntax error": lambda c: c.execute("SELEC 1"),
    "no such column": lambda c: c.execute("SELECT b FROM t"),
    "integrity error": lambda c: c.execute("INSERT INTO t VALUES (1)"),
    "wrong number of bindings": lambda c: c.execute("SELECT ? FROM t", ()),
}


@pytest.mark.parametrize("kind", sorted(BUGS))
def test_a_sql_bug_is_not_an_outage(conn, kind):
    exc = _raised(lambda: BUGS[kind](conn))
    assert isinstance(exc, sqlite3.DatabaseError)
    assert not is_outage(exc)
    assert describe_outage(exc) is None


@pytest.mark.parametrize("kind", sorted(BUGS))
def test_a_sql_bug_through_the_reader_is_a_query_error_not_an_outage(conn, kind):
    tx = Tx("sqlite", conn)
    sql, params = {"syntax error": ("SELEC 1", []), "no such column": ("SELECT b FROM t", []),
                   "integrity error": ("INSERT INTO t VALUES (1)", []),
                   "wrong number of bindings": ("SELECT ? FROM t", [])}[kind]
    exc = _raised(lambda: tx.query(sql, params))
    assert isinstance(exc, StorageQueryError)
    assert isinstance(exc.__cause__, sqlite3.DatabaseError) and exc.driver_error is exc.__cause__
    assert not is_outage(exc)
    assert describe_outage(exc) is None


def test_a_locked_file_is_an_outage_raw_and_translated(conn, tmp_path):
    other = sqlite3.connect(tmp_path / "deerflow.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    try:
        raw = _raised(lambda: conn.execute("INSERT INTO t VALUES (2)"))
        translated = _raised(lambda: Tx("sqlite", conn).execute("INSERT INTO t VALUES (2)"))
    finally:
        other.rollback()
        other.close()
    assert isinstance(raw, sqlite3.OperationalError) and "locked" in str(raw)
    assert isinstance(translated, StorageUnavailableError)
    for exc in (raw, translated):
        assert is_outage(exc)
        code, detail, hint = describe_outage(exc)
        assert code == "checkpoint_database_unavailable"
        assert "database is locked" in detail
        assert hint == "Another process holds a write lock on the file; retry in a moment."


def test_a_file_that_is_not_a_database_is_an_outage(tmp_path):
    path = tmp_path / "deerflow.db"
    path.write_bytes(b"this is not a SQLite file" * 100)
    c = sqlite3.connect(path)
    try:
        exc = _raised(lambda: Tx("sqlite", c).query("SELECT * FROM checkpoints"))
    finally:
        c.close()
    assert isinstance(exc, StorageUnavailableError) and "not a database" in str(exc)
    assert is_outage(exc)
    assert describe_outage(exc)[0] == "checkpoint_database_unavailable"


def test_the_middleware_answers_503_for_an_outage_and_500_for_a_bug(conn, tmp_path):
    """The outage middleware lets a bug through (Django answers 500) and catches an outage."""
    from django.test import RequestFactory

    from dashboard.errors.middleware import OutageMiddleware

    middleware = OutageMiddleware(lambda request: None)
    request = RequestFactory().get("/api/threads")
    bug = _raised(lambda: conn.execute("INSERT INTO t VALUES (1)"))
    assert isinstance(bug, sqlite3.IntegrityError)
    assert middleware.process_exception(request, bug) is None
    locked = StorageUnavailableError(sqlite3.OperationalError("database is locked"))
    response = middleware.process_exception(request, locked)
    assert response.status_code == 503 and response["Retry-After"] == "10"
