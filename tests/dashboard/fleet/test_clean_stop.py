"""A web process that is stopped cleanly deregisters: ``runserver`` (SIGTERM at its default, which would kill it
without running ``atexit``) marks its registry row stopped on SIGTERM, so a restart leaves no ghost behind."""

from __future__ import annotations

import signal
import sqlite3

from tests.integration import helpers


def _rows(var_dir) -> list[tuple]:
    with sqlite3.connect(var_dir / "dash.sqlite3") as conn:
        return conn.execute("SELECT role, pid, stopped_at FROM fleet_processrecord").fetchall()


def test_sigterm_deregisters_a_runserver(tmp_path):
    config_path, var_dir = helpers.dashboard_home(tmp_path, "delta")
    env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir, DJANGO_DEBUG="0",
                                DJANGO_SECRET_KEY="test", DJANGO_ALLOWED_HOSTS="127.0.0.1")
    helpers.run_manage(["migrate", "--noinput", "-v0"], env)
    port = helpers.free_port()
    proc = helpers.ManagedProcess.start(
        "runserver", [helpers.PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], env,
        tmp_path / "server.log")
    try:
        helpers.wait_http(f"http://127.0.0.1:{port}/healthz", proc, timeout=90)
        (row,) = helpers.wait_until(lambda: _rows(var_dir), timeout=30, proc=proc, what="the web process's row")
        assert row[0] == "web" and row[2] is None
        proc.popen.send_signal(signal.SIGTERM)
        assert proc.popen.wait(timeout=30) == 128 + signal.SIGTERM
        ((role, pid, stopped_at),) = _rows(var_dir)
        assert (role, pid) == ("web", proc.pid) and stopped_at is not None
    finally:
        proc.stop()
