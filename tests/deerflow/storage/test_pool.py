"""deerflow.storage.pool.FailFastConnectionPool lends no connection the server has ended (real Postgres; the session is
ended server-side with pg_terminate_backend, as a restart's fast shutdown ends every session)."""

from __future__ import annotations

import select

import psycopg
import pytest

from deerflow.storage.pool import FailFastConnectionPool, check_if_told
from tests import fixtures_real
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.postgres


def _pool() -> FailFastConnectionPool:
    return FailFastConnectionPool(fixtures_real.PG_ADMIN_URL, min_size=1, max_size=1, timeout=5,
                                  kwargs={"autocommit": True}, open=True)


def test_a_session_the_server_ended_is_replaced_before_it_is_lent():
    with _pool() as pool:
        with pool.connection() as conn:
            pid = conn.info.backend_pid
            dead = conn
        with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0] is True
        # The server's termination notice reaches the idle socket.
        wait_until(lambda: select.select([dead.fileno()], [], [], 0)[0], timeout=10, what="the notice")
        with pool.connection() as conn:
            assert conn is not dead and conn.info.backend_pid != pid
            assert conn.execute("SELECT 1").fetchone() == (1,)


def _last_query(pid: int) -> str:
    with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as admin:
        return admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]


def test_a_healthy_idle_connection_is_lent_without_a_round_trip():
    with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute("SELECT 42")
        check_if_told(conn)
        assert _last_query(conn.info.backend_pid) == "SELECT 42"  # nothing was sent
        FailFastConnectionPool.check_connection(conn)  # what a check on every checkout would cost
        assert _last_query(conn.info.backend_pid) == ""
        conn.close()
        with pytest.raises(psycopg.OperationalError):
            check_if_told(conn)  # a closed connection is checked, and fails
