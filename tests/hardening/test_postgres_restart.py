"""A real PostgreSQL restart under the dashboard and under a conversion (a private server, see private_postgres).

* Pages and the API answer right after a restart: the saver's pool checks a
  connection before lending it, so the sessions the restart ended are replaced
  instead of failing the next requests.
* While the server is down the dashboard answers the 503 outage page, and it
  comes back by itself when the server does (no dashboard restart).
* While the server is known to be down, the saver fails at once instead of
  making every caller wait the pool's timeout (a busy pool is not an outage).
* A conversion whose server restarts before it commits leaves the thread as it
  was (the restart rolled the transaction back); the task's retry converts it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import JobOptions
from deerflow import convert
from deerflow.config.database_config import DatabaseConfig
from deerflow.storage.pool import ServerUnreachable
from deerflow.storage.savers import open_checkpointer
from tests import fixtures_real
from tests.hardening.private_postgres import PrivatePostgres
from tests.integration.helpers import REPO_ROOT, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]  # restarts a server

THREAD = "delta-f10-9t"


@pytest.fixture(scope="module")
def private_server() -> Iterator[PrivatePostgres]:
    """A private server whose ``fixture`` database holds the real fixture dump (restored once)."""
    private = PrivatePostgres()
    try:
        private.start()
        with psycopg.connect(private.url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE fixture")
        fixtures_real.restore_postgres(private.url_of("fixture"))
        yield private
    finally:
        private.cleanup()


@pytest.fixture
def server(private_server: PrivatePostgres) -> Iterator[PrivatePostgres]:
    """The private server, running, with a fresh ``deerflow`` database copied from ``fixture`` for this test."""
    if not private_server.running:  # a failed test may have left it stopped
        private_server.start()
    with psycopg.connect(private_server.url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS deerflow WITH (FORCE)")
        admin.execute("CREATE DATABASE deerflow TEMPLATE fixture")
    yield private_server


def _url(server: PrivatePostgres) -> str:
    return server.url_of("deerflow")


def _database(server: PrivatePostgres) -> DatabaseConfig:
    return DatabaseConfig(backend="postgres", postgres_url=_url(server))


def _rows(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return [
            *conn.execute("SELECT checkpoint_ns, checkpoint_id, checkpoint::text, metadata::text FROM checkpoints "
                          "WHERE thread_id = %s ORDER BY 1, 2", (THREAD,)).fetchall(),
            *conn.execute("SELECT checkpoint_ns, channel, version, blob FROM checkpoint_blobs "
                          "WHERE thread_id = %s ORDER BY 1, 2, 3", (THREAD,)).fetchall(),
        ]


def _head_count(client) -> int:
    response = client.get(f"/api/threads/{THREAD}/state")
    assert response.status_code == 200, response.content
    return len(response.json()["values"]["messages"])


def test_pages_and_api_answer_right_after_a_restart(server, runtime_for, staff_client):
    runtime_for(_database(server), "delta")
    expected = fixtures_real.manifest_threads()[THREAD]["backends"]["postgres"]["head"]["message_count"]
    assert _head_count(staff_client) == expected
    listed = staff_client.get("/api/threads").json()["threads"]

    server.restart()

    # Every pooled session was ended by the restart; the very next requests still answer.
    assert _head_count(staff_client) == expected
    assert staff_client.get(f"/threads/{THREAD}/").status_code == 200
    assert staff_client.get("/api/threads").json()["threads"] == listed


def test_while_the_server_is_down_the_dashboard_says_so_and_recovers_by_itself(server, runtime_for, staff_client):
    rt = runtime_for(_database(server), "delta")
    rt.pool_timeout_s = 2.0  # set before the saver opens; the default 10 s only makes the test wait longer
    assert _head_count(staff_client) > 0

    server.stop()
    page = staff_client.get(f"/threads/{THREAD}/")
    assert page.status_code == 503
    assert page["Retry-After"]
    api = staff_client.get(f"/api/threads/{THREAD}/state")
    assert api.status_code == 503
    body = api.json()
    assert body["code"] == "checkpoint_database_unavailable", body
    # libpq's reason comes from the pool's own direct attempt (ServerUnreachable.reason), not a second probe
    assert body["hint"].startswith(f"PostgreSQL at 127.0.0.1:{server.port} is unreachable: Connection refused."), body

    server.start()
    # The pool reconnects in the background (psycopg_pool's backoff: 1 s, doubling while the server was down);
    # no dashboard restart is needed. Until it has, requests keep answering the 503 above, never a 500.
    statuses: list[int] = []

    def recovered() -> bool:
        statuses.append(staff_client.get(f"/api/threads/{THREAD}/state").status_code)
        return statuses[-1] == 200

    wait_until(recovered, timeout=60, interval=0.5, what="the dashboard to read the restarted server")
    assert set(statuses) <= {503, 200}, statuses
    assert _head_count(staff_client) > 0
    assert staff_client.get(f"/threads/{THREAD}/").status_code == 200


def test_a_restart_before_commit_rolls_the_conversion_back_and_the_retry_converts(server, runtime_for, monkeypatch):
    database = _database(server)
    runtime_for(database, "delta")
    original = _rows(_url(server))
    seen_after_restart: list[list[tuple]] = []
    real_convert = convert.convert_thread

    def restart_before_the_first_commit(session) -> None:
        if not seen_after_restart:
            server.restart()
            seen_after_restart.append(_rows(_url(server)))

    monkeypatch.setattr(convert, "convert_thread", lambda *args, **kwargs: real_convert(
        *args, before_commit=restart_before_the_first_commit, **kwargs))
    job = services.create_job(None, ConversionJob.Kind.CONVERT, {"thread_ids": [THREAD]}, JobOptions(confirmed=True,
                              runner="inline", launched_by="test"))
    job = services.run_inline(job, sleep=lambda seconds: None)

    assert seen_after_restart == [original], "the restart did not roll the uncommitted rewrite back"
    assert job.state == ConversionJob.State.SUCCEEDED
    result = job.results.get()
    assert (result.status, result.attempts) == ("converted", 2)
    assert _rows(_url(server)) != original
    assert [b.thread_id for b in convert.list_backups(database, THREAD)] == [THREAD]

    # The converted thread now reads in full mode, with the manifest's head messages.
    full = runtime_for(database, "full")
    from dashboard.threads.services import head_digest

    head = fixtures_real.manifest_threads()[THREAD]["backends"]["postgres"]["head"]
    digest = head_digest(full, THREAD)
    assert (digest["message_count"], digest["messages_sha256"]) == (head["message_count"], head["messages_sha256"])


DJANGO_SIDE = """
import sys

import django

django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import close_old_connections

call_command("migrate", verbosity=0)
User.objects.create_user("night-shift", is_staff=True)
print(User.objects.count(), flush=True)
sys.stdin.readline()  # the test restarts the server now
close_old_connections()  # what Django runs when a request starts (and ends)
print(User.objects.count(), flush=True)
"""


def test_the_dashboards_own_database_reconnects_after_a_restart(server, tmp_path):
    """DASHBOARD_DATABASE_URL on Postgres: a kept connection (CONN_MAX_AGE) is health-checked per request."""
    import os
    import subprocess
    import sys

    with psycopg.connect(server.url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS dashboard WITH (FORCE)")
        admin.execute("CREATE DATABASE dashboard")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings", "DJANGO_SECRET_KEY": "t" * 50,
           "DASHBOARD_DATABASE_URL": server.url_of("dashboard"), "DASHBOARD_VAR_DIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-c", DJANGO_SIDE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO_ROOT))
    try:
        assert process.stdout.readline().strip() == "1", process.stderr.read()
        server.restart()
        out, err = process.communicate("go\n", timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert out.strip() == "1"


def _config(thread_id: str = THREAD) -> dict:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def test_while_the_server_is_known_down_the_saver_fails_at_once(server):
    """After one timeout whose direct connection also failed, callers get ServerUnreachable without waiting."""
    with open_checkpointer(_database(server), timeout=1.0, unreachable_cooldown_s=600) as saver:
        assert saver.get_tuple(_config()) is not None
        server.stop()
        started = time.monotonic()
        with pytest.raises(ServerUnreachable, match="no pooled connection in time and a direct connection "
                                                    "failed: .*Connection refused") as first:
            saver.get_tuple(_config())
        assert time.monotonic() - started >= 1.0  # this caller waited the pool's timeout
        assert "Connection refused" in first.value.reason and first.value.reason == saver.conn.down_reason
        started = time.monotonic()
        with pytest.raises(ServerUnreachable, match=r"unreachable moments ago \(.*Connection refused.*\); not "
                                                    r"waiting for it again for up to 600 s") as second:
            saver.get_tuple(_config())
        assert time.monotonic() - started < 0.5  # no wait, no second direct attempt
        assert second.value.reason == first.value.reason
        assert isinstance(second.value, psycopg.OperationalError)  # what the outage pages catch


def test_after_the_cooldown_the_saver_reads_the_restarted_server(server):
    with open_checkpointer(_database(server), timeout=1.0, unreachable_cooldown_s=1.0) as saver:
        server.stop()
        with pytest.raises(PoolTimeout):
            saver.get_tuple(_config())
        server.start()

        def reads() -> bool:
            try:
                return saver.get_tuple(_config()) is not None
            except PoolTimeout:
                return False

        wait_until(reads, timeout=60, interval=0.5, what="the saver to read the restarted server")
        assert saver.conn.down_reason is None


def test_a_busy_pool_is_not_taken_for_an_outage(server):
    with open_checkpointer(_database(server), pool_size=1, timeout=0.5, unreachable_cooldown_s=600) as saver:
        with saver.conn.connection():  # the pool's only connection is in use
            with pytest.raises(PoolTimeout) as busy:
                saver.get_tuple(_config())
            assert not isinstance(busy.value, ServerUnreachable)
            assert saver.conn.down_reason is None  # the server answered the direct attempt
        assert saver.get_tuple(_config()) is not None
