"""Start a real fleet for the acceptance tests: web server, Celery workers, one registry, one broker.

Built on tests/integration/helpers.py (clean environments, process groups,
log files, Redis db claiming). Every process of one fleet shares the Django
database file (the process registry), the Redis db (broker and results) and
the checkpoint database, and freezes from its own config.yaml, as an
operator's deployment would.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from celery import Celery

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.configs import write_config
from tests.integration import helpers

READY_TIMEOUT = 90
RESULT_TIMEOUT = 60
TASK = "threads.materialize_head"


@dataclass
class Worker:
    """A running worker: process, config file, Celery node name and its private queue."""

    proc: helpers.ManagedProcess
    config_path: Path
    hostname: str
    queue: str

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass
class FleetHome:
    """Paths and environment shared by every process of one test fleet."""

    root: Path
    redis_db: int
    heartbeat_s: int = 1
    procs: list[helpers.ManagedProcess] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def registry_path(self) -> Path:
        return self.root / "dash.sqlite3"

    @classmethod
    def create(cls, root: Path, redis_db: int, heartbeat_s: int = 1) -> FleetHome:
        """A private fixture copy, a var dir, and a migrated registry database."""
        fixtures_real.restore_sqlite(root / "data")
        (root / "var").mkdir(parents=True, exist_ok=True)
        home = cls(root, redis_db, heartbeat_s)
        helpers.run_manage(["migrate", "--noinput"], home.env(home.config("migrate.yaml", "delta", 10)))
        return home

    def config(self, name: str, mode: str, snapshot_frequency: int) -> Path:
        """Write ``root/<name>`` for the shared checkpoint database; returns its path."""
        return write_config(self.root / name, DatabaseConfig(backend="sqlite", sqlite_dir=str(self.data_dir)), mode,
                            snapshot_frequency)

    def env(self, config_path: Path, **extra: str) -> dict[str, str]:
        url = helpers.redis_url(self.redis_db)
        return helpers.dashboard_env(
            config_path=config_path, var_dir=self.root / "var",
            DASHBOARD_DATABASE_URL=f"sqlite:///{self.registry_path}",
            DASHBOARD_HEARTBEAT_S=str(self.heartbeat_s),
            CELERY_BROKER_URL=url, CELERY_RESULT_BACKEND=url, **extra)

    # -- processes -----------------------------------------------------------------------------
    def start_worker(self, name: str, config_path: Path, *extra_args: str) -> Worker:
        """``celery -A dashboard worker -Q <name>,dashboard`` frozen from ``config_path``; waits for ping."""
        node = f"{name}-{uuid.uuid4().hex[:6]}@%h"
        argv = [str(helpers.VENV_BIN / "celery"), "-A", "dashboard", "worker", "--loglevel=INFO",
                "--pool=prefork", "--concurrency=1", "-Q", f"{name},dashboard", "-n", node,
                "--without-heartbeat", "--without-gossip", "--without-mingle", *extra_args]
        proc = helpers.ManagedProcess.start(f"worker {name}", argv, self.env(config_path),
                                            self.root / f"worker-{name}.log")
        self.procs.append(proc)
        match = helpers.wait_for_log(proc, r"^.*\] (\S+@\S+) ready\.$", timeout=READY_TIMEOUT)
        hostname = match.group(1)
        app = self.client_app()
        try:
            helpers.wait_until(lambda: any(hostname in r for r in app.control.ping([hostname], timeout=1.0) or []),
                               timeout=READY_TIMEOUT, proc=proc, what=f"control ping reply from {hostname}")
        finally:
            app.close()
        return Worker(proc, config_path, hostname, name)

    def start_web(self, config_path: Path) -> tuple[helpers.ManagedProcess, str]:
        """``manage.py runserver --noreload`` (loads dashboard/wsgi.py, which registers); returns (proc, base url)."""
        port = helpers.free_port()
        proc = helpers.ManagedProcess.start(
            "runserver", [helpers.PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            self.env(config_path), self.root / "web.log")
        self.procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        helpers.wait_http(base + "/accounts/login/", proc, timeout=READY_TIMEOUT)
        return proc, base

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()

    # -- talking to the fleet ------------------------------------------------------------------
    def client_app(self) -> Celery:
        """A Celery client configured like ``dashboard.celery.app``, on this fleet's Redis db."""
        url = helpers.redis_url(self.redis_db)
        app = Celery("fleet-test-client", set_as_current=False)
        app.config_from_object("django.conf:settings", namespace="CELERY")
        app.conf.update(broker_url=url, result_backend=url, broker_transport_options={},
                        broker_connection_retry_on_startup=True)
        return app

    def materialize(self, app: Celery, thread_id: str, queue: str) -> dict:
        result = app.send_task(TASK, args=[thread_id], queue=queue)
        try:
            return result.get(timeout=RESULT_TIMEOUT)
        finally:
            result.forget()

    def registry(self) -> list[dict]:
        """The registry rows as the fleet wrote them (read straight from the shared database file)."""
        conn = sqlite3.connect(f"file:{self.registry_path}?mode=ro", uri=True, timeout=30)
        try:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute("SELECT * FROM fleet_processrecord ORDER BY id")]
        finally:
            conn.close()

    def row_for(self, pid: int) -> dict | None:
        return next((r for r in self.registry() if r["pid"] == pid), None)

    def audit(self, config_path: Path, *args: str) -> tuple[int, dict]:
        """``manage.py audit_modes --json <args>`` as a subprocess with the fleet's environment."""
        proc = subprocess.run([helpers.PYTHON, "manage.py", "audit_modes", "--json", *args], cwd=helpers.REPO_ROOT,
                              env=self.env(config_path), capture_output=True, text=True, timeout=180)
        assert proc.returncode in (0, 1), f"audit_modes exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc.returncode, json.loads(proc.stdout)

    def issue_token(self, config_path: Path) -> str:
        """Create a staff user and an API token in the registry database; returns the raw token."""
        env = self.env(config_path)
        helpers.run_manage(["shell", "-c", (
            "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Permission; "
            "get_user_model().objects.create_user('fleet-admin', password='x', is_staff=True)"
            ".user_permissions.add(Permission.objects.get(codename='report_heartbeat'))")], env)
        return helpers.run_manage(["create_api_token", "fleet-admin"], env).stdout.strip()


def findings(audit: dict, code: str) -> list[dict]:
    return [f for f in audit["findings"] if f["code"] == code]
