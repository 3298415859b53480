"""Outages of the checkpoint database, in process: pages answer a 503 page and the API a 503 JSON, never a traceback.

The checkpoint database is made unreachable for real: a Postgres URL on a
closed port, a database without LangGraph's tables, a SQLite file whose
tables were dropped or that is not a database, and the shared Postgres
server seen through :class:`~tests.hardening.tcp_proxy.TcpProxy`, taken down
and brought back (the server itself serves other suites and is never
restarted). Django's own database and the broker are covered with real
gunicorn processes in ``test_outages_live.py``.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import psycopg
import pytest

from deerflow.config.database_config import DatabaseConfig
from tests.dashboard.html import parse
from tests.hardening.tcp_proxy import TcpProxy

CLOSED_PORT_URL = "postgresql://postgres@127.0.0.1:1/deerflow"
PAGES = ["/threads/", "/threads/delta-f10-9t/", "/history/delta-f10-9t/", "/thread/?thread_id=delta-f10-9t"]
APIS = ["/api/threads", "/api/threads/delta-f10-9t/state", "/api/threads/delta-f10-9t/history"]


def page_error(response) -> str:
    """The visible text of the error card (asserting there is one and no traceback)."""
    body = response.content.decode()
    assert "Traceback" not in body and "File \"" not in body
    (card,) = parse(body).find_all("section", cls="error-card")
    return card.text


@pytest.fixture
def unreachable_rt(runtime_for):
    """A delta runtime whose checkpoint database is Postgres on a closed port (1 s pool timeout)."""
    rt = runtime_for(DatabaseConfig(backend="postgres", postgres_url=CLOSED_PORT_URL), "delta")
    rt.pool_timeout_s = 1.0
    return rt


def test_pages_answer_503_naming_the_server_the_reason_and_what_to_do(unreachable_rt, staff_client):
    for url in PAGES:
        response = staff_client.get(url)
        assert response.status_code == 503, url
        text = page_error(response)
        assert "HTTP 503 · checkpoint_database_unavailable" in text, url
        assert "PostgreSQL at 127.0.0.1:1 is unreachable: Connection refused. Start it (README) and retry." in text
        assert str(unreachable_rt.config.path) in text  # which config.yaml names the server
        assert response["Retry-After"] and "script-src 'self'" in response["Content-Security-Policy"]


def test_api_answers_503_detail_and_hint(unreachable_rt, staff_client):
    for url in APIS:
        response = staff_client.get(url)
        assert response.status_code == 503, url
        body = response.json()
        assert body["code"] == "checkpoint_database_unavailable"
        assert "cannot be reached" in body["detail"]
        assert body["hint"].startswith("PostgreSQL at 127.0.0.1:1 is unreachable: Connection refused.")


def test_htmx_refresh_gets_the_error_fragment(unreachable_rt, staff_client):
    response = staff_client.get("/threads/", headers={"HX-Request": "true"})
    assert response.status_code == 503
    assert "<html" not in response.content.decode()
    assert "PostgreSQL at 127.0.0.1:1 is unreachable" in page_error(response)


def test_password_in_the_url_is_never_shown(runtime_for, staff_client):
    rt = runtime_for(DatabaseConfig(backend="postgres",
                                    postgres_url="postgresql://admin:s3cret-pw@127.0.0.1:1/deerflow"), "delta")
    rt.pool_timeout_s = 1.0
    for response in (staff_client.get("/threads/"), staff_client.get("/api/threads")):
        assert response.status_code == 503
        assert "s3cret-pw" not in response.content.decode()


@pytest.mark.postgres
def test_a_database_without_checkpoint_tables_says_so(empty_postgres_db, runtime_for, staff_client):
    runtime_for(empty_postgres_db, "delta")
    body = staff_client.get("/api/threads").json()
    assert body["code"] == "checkpoint_tables_missing"
    assert "no LangGraph checkpoint tables" in body["detail"] and "postgres_url" in body["hint"]
    assert "checkpoint_tables_missing" in page_error(staff_client.get("/threads/"))


def test_sqlite_tables_dropped_under_a_running_process(sqlite_fixture_db_rw, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db_rw, "delta")
    assert staff_client.get("/api/threads").status_code == 200
    with sqlite3.connect(Path(sqlite_fixture_db_rw.sqlite_dir) / "deerflow.db") as conn:
        conn.execute("DROP TABLE checkpoints")
    body = staff_client.get("/api/threads").json()
    assert body["code"] == "checkpoint_tables_missing"
    assert "deerflow.db" in body["detail"] and "sqlite_dir" in body["hint"]


def test_sqlite_file_that_is_not_a_database(tmp_path, runtime_for, staff_client):
    (tmp_path / "deerflow.db").write_bytes(b"this is not an SQLite file\n" * 200)
    runtime_for(DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path)), "delta")
    response = staff_client.get("/threads/")
    assert response.status_code == 503
    assert "file is not a database" in page_error(response)
    assert staff_client.get("/api/threads").json()["code"] == "checkpoint_database_unavailable"


@pytest.mark.postgres
def test_postgres_going_away_and_coming_back(postgres_fixture_db, runtime_for, staff_client):
    """Connections cut mid-flight and refused while down answer 503; the same process recovers unaided."""
    info = psycopg.conninfo.conninfo_to_dict(postgres_fixture_db.postgres_url)
    proxy = TcpProxy(info.get("host") or "127.0.0.1", int(info.get("port") or 5432)).up()
    try:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/{info['dbname']}"
        rt = runtime_for(DatabaseConfig(backend="postgres", postgres_url=url), "delta")
        rt.pool_timeout_s = 1.0
        before = staff_client.get("/api/threads?limit=1000").json()["threads"]
        assert staff_client.get("/threads/delta-f10-9t/").status_code == 200

        proxy.down()
        for url_ in ("/api/threads", "/threads/delta-f10-9t/", "/api/threads/delta-f10-9t/state"):
            response = staff_client.get(url_)
            assert response.status_code == 503, url_
            assert "checkpoint_database_unavailable" in response.content.decode()

        proxy.up()
        deadline = time.monotonic() + 30
        while (response := staff_client.get("/api/threads?limit=1000")).status_code != 200:
            assert time.monotonic() < deadline, response.content
            time.sleep(0.5)
        assert response.json()["threads"] == before
        assert staff_client.get("/threads/delta-f10-9t/").status_code == 200
    finally:
        proxy.down()
