"""Web throughput under 20 concurrent clients: gunicorn gthread (docker/compose.yaml's) vs two sync workers.

A bounded loopback load test (issue 15): gunicorn serves a private copy of
the fixture SQLite in delta mode; 20 client threads, each on its own
keep-alive connection with a staff session, request the thread list and a
thread page in turn for :data:`SECONDS` seconds per server configuration.
Keys: ``web_rps_20_clients`` and ``web_p99_ms_20_clients`` (and ``_p50_``)
for the compose configuration (``dashboard.gunicorn_conf``), the same with
``_sync2`` for the old two sync workers. Requests per second count answers
of status 200 only; any other status is counted in ``web_errors_20_clients``.
"""

from __future__ import annotations

import http.client
import statistics
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import Context

__all__ = ["CLIENTS", "PATHS", "SECONDS", "run"]

CLIENTS = 20
SECONDS = 15.0
PATHS = ("/threads/", "/threads/delta-f10-9t/")
CONFIGS = {"": ["--config", "python:dashboard.gunicorn_conf"],
           "_sync2": ["--workers", "2", "--timeout", "60"]}

_SESSION = (
    "from django.contrib.auth import get_user_model, BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY; "
    "from django.contrib.sessions.backends.db import SessionStore; "
    "u = get_user_model().objects.create_user('bench', password='bench-pass', is_staff=True); "
    "s = SessionStore(); s[SESSION_KEY] = str(u.pk); "
    "s[BACKEND_SESSION_KEY] = 'django.contrib.auth.backends.ModelBackend'; "
    "s[HASH_SESSION_KEY] = u.get_session_auth_hash(); s.create(); print(s.session_key)"
)


def _client(port: int, cookie: str, until: float, latencies: list[float], errors: list[int]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    n = 0
    while time.monotonic() < until:
        path = PATHS[n % len(PATHS)]
        n += 1
        started = time.perf_counter()
        try:
            conn.request("GET", path, headers={"Cookie": f"sessionid={cookie}"})
            response = conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            errors.append(0)
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        if response.status == 200:
            latencies.append((time.perf_counter() - started) * 1000)
        else:
            errors.append(response.status)
    conn.close()


def _load(port: int, cookie: str) -> tuple[float, float, float, int]:
    """``(requests/s, p50 ms, p99 ms, errors)`` of :data:`CLIENTS` clients for :data:`SECONDS`."""
    latencies: list[float] = []
    errors: list[int] = []
    started = time.monotonic()
    until = started + SECONDS
    threads = [threading.Thread(target=_client, args=(port, cookie, until, latencies, errors))
               for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    cuts = statistics.quantiles(latencies, n=100)
    return len(latencies) / elapsed, cuts[49], cuts[98], len(errors)


def run(ctx: Context) -> None:
    """Add ``web_rps_20_clients``, ``web_p50_ms_20_clients``, ``web_p99_ms_20_clients`` (and ``_sync2``)."""
    from tests.integration import helpers

    with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
        root = Path(tmp)
        config_path, var_dir = helpers.dashboard_home(root, "delta")
        env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir, DJANGO_DEBUG="0",
                                    DJANGO_SECRET_KEY="bench-only-secret", DJANGO_ALLOWED_HOSTS="127.0.0.1")
        helpers.run_manage(["migrate", "--noinput"], env)
        cookie = helpers.run_manage(["shell", "-c", _SESSION], env).stdout.strip().splitlines()[-1]
        for suffix, args in CONFIGS.items():
            port = helpers.free_port()
            proc = helpers.ManagedProcess.start(
                f"gunicorn{suffix}", [str(helpers.VENV_BIN / "gunicorn"), "dashboard.wsgi", *args,
                                      "--bind", f"127.0.0.1:{port}", "--access-logfile", "/dev/null"],
                env, root / f"gunicorn{suffix}.log")
            try:
                helpers.wait_http(f"http://127.0.0.1:{port}/healthz", proc, timeout=90)
                for path in PATHS:  # warm every worker's caches a little
                    _load_once(port, cookie, path)
                rps, p50, p99, errors = _load(port, cookie)
            finally:
                proc.stop()
            ctx.results[f"web_rps_20_clients{suffix}"] = round(rps, 1)
            ctx.results[f"web_p50_ms_20_clients{suffix}"] = round(p50, 1)
            ctx.results[f"web_p99_ms_20_clients{suffix}"] = round(p99, 1)
            ctx.results[f"web_errors_20_clients{suffix}"] = errors
            ctx.log(f"gunicorn{suffix or ' gthread'}: {rps:.1f} req/s, p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
                    f"{errors} errors")
    ctx.notes.append(f"Web: {CLIENTS} clients on loopback for {SECONDS:.0f} s per configuration, the thread list "
                     f"and a thread page in turn (fixture SQLite, delta mode); `_sync2` is two sync workers.")


def _load_once(port: int, cookie: str, path: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for _ in range(5):
            conn.request("GET", path, headers={"Cookie": f"sessionid={cookie}"})
            conn.getresponse().read()
    finally:
        conn.close()
