"""Browsing needs only ``SELECT`` on LangGraph's checkpoint tables.

A role is created with ``LOGIN`` and ``SELECT`` on ``checkpoints``,
``checkpoint_blobs``, ``checkpoint_writes`` and ``checkpoint_migrations``
(nothing else) in a private restore of the real fixture; a dashboard runtime
connects as that role and every browsing route (thread list with filters
and pages, thread page, history, state and history API, fleet audit) answers
exactly what a superuser connection answers. The role is first shown unable
to write, so a pass means browsing never writes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real

pytestmark = pytest.mark.postgres

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
THREADS = ["delta-f10-9t", "markerless-delta-f10-13t", "migrated-full20-delta20", "full-short-3t"]
ROUTES = [
    "/api/threads?limit=1000",
    "/api/threads?mode=delta&limit=5",
    "/api/threads?thread_class=migrated",
    "/api/threads?q=delta",
    *(f"/api/threads/{t}/state" for t in THREADS),
    *(f"/api/threads/{t}/history?limit=30" for t in THREADS),
]
PAGES = ["/threads/", "/threads/?mode=delta", *(f"/threads/{t}/" for t in THREADS),
         *(f"/history/{t}/" for t in THREADS), "/audit/"]


@pytest.fixture
def readonly_db(postgres_fixture_db_rw: DatabaseConfig) -> Iterator[DatabaseConfig]:
    """The private fixture restore, as seen by a role that may only SELECT the checkpoint tables."""
    role = f"dfa_readonly_{uuid.uuid4().hex[:10]}"
    admin_url = postgres_fixture_db_rw.postgres_url
    dbname = psycopg.conninfo.conninfo_to_dict(admin_url)["dbname"]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE')
        conn.execute('REVOKE CREATE ON SCHEMA public FROM PUBLIC')
        conn.execute(f'GRANT SELECT ON {", ".join(TABLES)} TO "{role}"')
    try:
        yield DatabaseConfig(backend="postgres",
                             postgres_url=f"postgresql://{role}@127.0.0.1:5432/{dbname}")
    finally:
        fixtures_real_terminate(dbname, role)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
        with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def fixtures_real_terminate(dbname: str, role: str) -> None:
    """End the role's sessions (the runtime's pool) so the role can be dropped."""
    with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))


def test_the_role_cannot_write(readonly_db):
    with psycopg.connect(readonly_db.postgres_url, autocommit=True) as conn:
        for sql in ("DELETE FROM checkpoints WHERE false",
                    "UPDATE checkpoint_blobs SET blob = blob WHERE false",
                    "INSERT INTO checkpoint_migrations (v) VALUES (-1)",
                    "CREATE TABLE dashboard_probe (x int)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)


def test_every_browsing_route_works_and_matches_a_superuser(readonly_db, postgres_fixture_db_rw, runtime_for,
                                                             staff_client):
    runtime_for(postgres_fixture_db_rw, "delta")
    expected = {url: staff_client.get(url).json() for url in ROUTES}
    runtime_for(readonly_db, "delta")
    for url in ROUTES:
        response = staff_client.get(url)
        assert response.status_code == 200, (url, response.content[:500])
        assert response.json() == expected[url], url
    for url in PAGES:
        response = staff_client.get(url)
        assert response.status_code == 200, (url, response.content[:500])


def test_full_mode_refusals_work_read_only_too(readonly_db, runtime_for, staff_client):
    runtime_for(readonly_db, "full")
    assert staff_client.get("/api/threads/delta-f10-9t/state").status_code == 409
    assert staff_client.get("/api/threads/full-short-3t/state").status_code == 200
