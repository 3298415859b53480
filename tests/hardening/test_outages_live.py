"""Outages seen by a real production-configured web process (gunicorn, ``DJANGO_DEBUG=0``).

* Django's own database unreachable (``DASHBOARD_DATABASE_URL`` on a closed
  port): the process still starts, ``/healthz`` answers (it reads no
  database), a page whose session must be loaded answers the 503 page, the
  API the 503 JSON; never a traceback.
* Django's own database on Postgres but never migrated: the same 503 page
  and JSON, saying which table is missing and to run ``manage.py migrate``.
* The broker unreachable (``CELERY_BROKER_URL=redis://127.0.0.1:1/0``) from
  the start: browsing works; launching a job answers 503 with the broker's
  hint and the job waits ``paused`` (resume it when the broker is back);
  the launch page's worker check and the audit's live check say the broker
  cannot be reached.
"""

from __future__ import annotations

import http.cookiejar
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import fixtures_real
from tests.integration import helpers

SECRET = "hardening-test-secret-key-" + "x" * 40
CREATE_MANAGER = """
from django.contrib.auth.models import Permission, User
from tests.conftest import register_live_worker
user = User.objects.create_user("manager", password="manager-pass", is_staff=True)
user.user_permissions.add(Permission.objects.get(codename="manage_conversions"))
register_live_worker(heartbeat_interval_s=3600)  # a worker that was alive when the broker went away
"""


@dataclass
class Web:
    """A gunicorn serving the dashboard, and an HTTP client keeping cookies."""

    proc: helpers.ManagedProcess
    base: str
    opener: urllib.request.OpenerDirector
    cookies: http.cookiejar.CookieJar

    def request(self, path: str, *, data: bytes | None = None, headers: dict | None = None) -> tuple[int, str, dict]:
        req = urllib.request.Request(self.base + path, data=data, headers=headers or {})
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, resp.read().decode(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), dict(exc.headers)

    def login(self, username: str, password: str) -> None:
        status, body, _ = self.request("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body).group(1)
        form = urllib.parse.urlencode({"username": username, "password": password,
                                       "csrfmiddlewaretoken": token}).encode()
        status, body, _ = self.request("/accounts/login/", data=form, headers={"Referer": self.base + "/"})
        assert status == 200 and "Log out" in body, body[:500]

    def csrf(self) -> str:
        return next(c.value for c in self.cookies if c.name == "csrftoken")


def start_web(tmp_path: Path, **env_extra: str) -> Web:
    config_path, var_dir = helpers.dashboard_home(tmp_path, "delta")
    env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir, DJANGO_DEBUG="0",
                                DJANGO_SECRET_KEY=SECRET, DJANGO_ALLOWED_HOSTS="127.0.0.1", **env_extra)
    if "DASHBOARD_DATABASE_URL" not in env_extra:
        helpers.run_manage(["migrate", "--noinput"], env)
        helpers.run_manage(["shell", "-c", CREATE_MANAGER], env)
    port = helpers.free_port()
    argv = [str(helpers.VENV_BIN / "gunicorn"), "dashboard.wsgi", "--bind", f"127.0.0.1:{port}",
            "--workers", "1", "--timeout", "60"]
    proc = helpers.ManagedProcess.start("gunicorn", argv, env, tmp_path / "gunicorn.log")
    base = f"http://127.0.0.1:{port}"
    try:
        helpers.wait_http(base + "/healthz", proc, timeout=90)
    except BaseException:
        proc.stop()
        raise
    jar = http.cookiejar.CookieJar()
    web = Web(proc, base, urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar)), jar)
    return web


@pytest.fixture
def web_without_dashboard_db(tmp_path: Path) -> Iterator[Web]:
    web = start_web(tmp_path, DASHBOARD_DATABASE_URL="postgresql://postgres@127.0.0.1:1/dashboard")
    yield web
    web.proc.stop()


@pytest.fixture
def web_without_broker(tmp_path: Path) -> Iterator[Web]:
    web = start_web(tmp_path, CELERY_BROKER_URL="redis://127.0.0.1:1/0")
    yield web
    web.proc.stop()


def assert_no_traceback(body: str) -> None:
    assert "Traceback" not in body and 'File "' not in body, body[:2000]


def test_dashboard_database_down(web_without_dashboard_db):
    web = web_without_dashboard_db
    status, body, _ = web.request("/healthz")
    assert (status, body) == (200, "ok mode=delta snapshot_frequency=10\n")

    status, body, headers = web.request("/threads/", headers={"Cookie": "sessionid=abcdefghijklmnopqrstuvwxyz012345"})
    assert status == 503, body[:2000]
    assert_no_traceback(body)
    assert "dashboard_database_unavailable" in body
    assert "PostgreSQL at 127.0.0.1:1 is unreachable: Connection refused. Start it (README) and retry." in body
    assert headers["Retry-After"] and "Content-Security-Policy" in headers

    status, body, _ = web.request("/api/threads", headers={"Authorization": "Bearer some-token"})
    assert status == 503
    payload = json.loads(body)
    assert payload["code"] == "dashboard_database_unavailable"
    assert payload["hint"].startswith("PostgreSQL at 127.0.0.1:1 is unreachable")


@pytest.fixture
def web_with_unmigrated_dashboard_db(tmp_path: Path) -> Iterator[Web]:
    name, url = fixtures_real.create_database("dfa_unmigrated")
    try:
        web = start_web(tmp_path, DASHBOARD_DATABASE_URL=url)
        yield web
        web.proc.stop()
    finally:
        fixtures_real.drop_database(name)


def test_unmigrated_dashboard_database(web_with_unmigrated_dashboard_db):
    web = web_with_unmigrated_dashboard_db
    status, body, headers = web.request("/threads/", headers={"Cookie": "sessionid=abcdefghijklmnopqrstuvwxyz012345"})
    assert status == 503, body[:2000]
    assert_no_traceback(body)
    assert "dashboard_database_unavailable" in body
    assert 'relation &quot;django_session&quot; does not exist' in body
    assert "Run `python manage.py migrate` (with the same DASHBOARD_DATABASE_URL), then retry." in body

    status, body, _ = web.request("/api/threads", headers={"Authorization": "Bearer some-token"})
    assert status == 503, body
    payload = json.loads(body)
    assert payload["code"] == "dashboard_database_unavailable"
    assert payload["hint"].startswith("PostgreSQL at 127.0.0.1:5432: relation")
    assert payload["hint"].endswith(
        "Run `python manage.py migrate` (with the same DASHBOARD_DATABASE_URL), then retry.")


def _eventually(web, path: str, ok, timeout_s: float = 15.0):
    """``(status, body)`` of the first answer of ``path`` that ``ok(body)`` accepts (asked every 0.2 s)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, body, _ = web.request(path)
        if ok(body) or time.monotonic() > deadline:
            return status, body
        time.sleep(0.2)


def test_broker_down_from_the_start(web_without_broker):
    web = web_without_broker
    web.login("manager", "manager-pass")
    status, body, _ = web.request("/threads/delta-f10-9t/")
    assert status == 200  # browsing needs no broker

    form = urllib.parse.urlencode({"thread_id": "delta-f10-9t", "csrfmiddlewaretoken": web.csrf()}).encode()
    status, body, _ = web.request("/jobs/launch", data=form, headers={"Referer": web.base + "/"})
    assert status == 503, body[:2000]
    assert_no_traceback(body)
    assert "broker_unavailable" in body
    assert "Redis at redis://127.0.0.1:1/0 is unreachable" in body and "resume it" in body

    status, body, _ = web.request("/api/jobs", headers={"X-CSRFToken": web.csrf()})
    (job,) = json.loads(body)["jobs"]
    assert job["state"] == "paused"  # nothing will start it by itself: it waits for an operator's resume

    status, body, _ = web.request("/api/jobs",
                                  data=json.dumps({"kind": "dry_run", "thread_ids": ["delta-f10-1t"]}).encode(),
                                  headers={"X-CSRFToken": web.csrf(), "Content-Type": "application/json",
                                           "Referer": web.base + "/"})
    assert status == 503 and json.loads(body)["code"] == "broker_unavailable"

    # the pages serve the newest check, made in the background: the broker's outage shows once it answered
    status, body = _eventually(web, "/jobs/workers", lambda b: "Cannot reach the Celery broker" in b)
    assert status == 200
    status, body, _ = web.request(f"/jobs/{job['id']}/")
    assert status == 200 and "paused" in body
    status, body = _eventually(web, "/api/audit",
                               lambda b: "broker unreachable" in (json.loads(b)["live"]["error"] or ""))
    assert status == 200
