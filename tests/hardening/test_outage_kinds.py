"""Which database errors are outages, and what they are called (:mod:`dashboard.errors.outages`).

A missing table or column means the dashboard's migrations were not (all)
applied: an operator's setup step, answered 503 with "run migrate". Any other
``ProgrammingError`` (bad SQL) is a bug in this code and must not be dressed up
as an outage. The errors come from a real Postgres through a real Django
connection, wrapped as Django wraps them.

A dropped ``dfa_*`` summary table is not "no LangGraph checkpoint tables".
"""

from __future__ import annotations

from collections.abc import Iterator

import dj_database_url
import pytest
from django.db import utils as db_utils

from dashboard.errors.outages import describe_outage, is_outage
from tests import fixtures_real


@pytest.fixture(scope="module")
def postgres_connection(django_db_blocker) -> Iterator:
    """A Django connection (not the test default) to a new Postgres database holding one table ``t(a)``."""
    name, url = fixtures_real.create_database("dfa_outage_kinds")
    connection = db_utils.ConnectionHandler({"default": dj_database_url.parse(url)})["default"]
    try:
        with django_db_blocker.unblock():
            with connection.cursor() as cursor:
                cursor.execute("CREATE TABLE t (a integer)")
            yield connection
            connection.close()
    finally:
        fixtures_real.drop_database(name)


def _error(connection, sql: str) -> BaseException:
    with pytest.raises(db_utils.DatabaseError) as caught, connection.cursor() as cursor:
        cursor.execute(sql)
    return caught.value


@pytest.mark.parametrize(("sql", "reason"), [
    ("SELECT * FROM django_session", 'relation "django_session" does not exist'),
    ("SELECT queued_at FROM t", 'column "queued_at" does not exist'),
])
def test_a_missing_table_or_column_is_an_unmigrated_database(postgres_connection, sql, reason):
    exc = _error(postgres_connection, sql)
    assert isinstance(exc, db_utils.ProgrammingError)
    assert is_outage(exc)
    code, detail, hint = describe_outage(exc)
    assert code == "dashboard_database_unavailable"
    assert detail.startswith("The dashboard's own database (DASHBOARD_DATABASE_URL")
    assert reason in hint
    assert hint.endswith("Run `python manage.py migrate` (with the same DASHBOARD_DATABASE_URL), then retry.")


def test_other_sql_errors_are_bugs_not_outages(postgres_connection):
    exc = _error(postgres_connection, "SELEC 1")
    assert isinstance(exc, db_utils.ProgrammingError)
    assert not is_outage(exc)
    assert describe_outage(exc) is None


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_a_dropped_summary_table_is_not_called_missing_checkpoint_tables(postgres_connection, tmp_path, dialect):
    """LangGraph's tables are there; the dashboard's own dfa_* tables were dropped (the list recreates them)."""
    import sqlite3

    import psycopg

    if dialect == "postgres":
        with pytest.raises(psycopg.errors.UndefinedTable) as caught, psycopg.connect(_url(postgres_connection)) as conn:
            conn.execute("SELECT * FROM dfa_summary_state")
    else:
        with pytest.raises(sqlite3.OperationalError) as caught:
            sqlite3.connect(tmp_path / "deerflow.db").execute("SELECT * FROM dfa_summary_state")
    assert is_outage(caught.value)
    code, detail, hint = describe_outage(caught.value)
    assert code == "summary_tables_missing"
    assert "dfa_summary_state" in detail and "LangGraph's own tables are not affected" in detail
    assert hint.startswith("Reload: the thread list recreates and rebuilds them")


def _url(connection) -> str:
    s = connection.settings_dict
    return f"postgresql://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
