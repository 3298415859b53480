"""Fleet test fixtures: frozen runtimes on real databases, registry rows, personas, API tokens.

``runtime_for`` (``tests/conftest.py``) freezes the process on a real config.yaml. ``process_row``
creates :class:`ProcessRecord` rows the way heartbeats leave them, so the audit's
findings can be checked one at a time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.utils import timezone

from dashboard.fleet.control import LiveCheck
from deerflow.config.database_config import DatabaseConfig
from deerflow.storage.savers import open_checkpointer


@pytest.fixture(autouse=True)
def private_broker(tmp_path: Path) -> Iterator[None]:
    """Point the in-process Celery app at a private filesystem broker (the embedded default).

    In-process audits broadcast the live check; a worker someone else runs on
    the default broker folders must not answer this test's broadcast.
    """
    from dashboard.celery import app

    root = tmp_path / "broker"
    options = {"data_folder_in": str(root / "queue"), "data_folder_out": str(root / "queue"),
               "processed_folder": str(root / "processed"), "control_folder": str(root / "control"),
               "store_processed": False}
    for folder in ("queue", "processed", "control"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    saved = {"broker_url": app.conf.broker_url, "broker_transport_options": app.conf.broker_transport_options}
    _drop_broker_pools(app)
    app.conf.update(broker_url="filesystem://", broker_transport_options=options)
    try:
        yield
    finally:
        _drop_broker_pools(app)
        app.conf.update(**saved)


def _drop_broker_pools(app) -> None:
    """Forget the app's connection and producer pools (Celery resets them so after a fork), so that the next
    send connects with the broker options then in force: pools made on this test's private folders must not
    serve a later test (``tests/dashboard/jobs/test_stalls.py`` reads the configured broker folder)."""
    # Forgotten, not closed: a producer made from the old pool may still be held (kombu's pools), and a
    # closed pool raises "Acquire on closed pool" at its next send.
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@pytest.fixture
def empty_sqlite_db(tmp_path: Path) -> DatabaseConfig:
    """A fresh SQLite checkpoint database with LangGraph's tables and no threads."""
    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "empty-data"))
    with open_checkpointer(database, create=True):
        pass
    return database


_pids = itertools.count(41000)


def sha(text: str) -> str:
    """A stand-in config.yaml SHA-256 for registry rows (the hash of ``text``)."""
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def process_row(db) -> Callable[..., object]:
    """Factory for registry rows: ``process_row("worker", mode="delta", snapshot_frequency=25, ...)``.

    Defaults describe a live process that heartbeated just now (15 s interval),
    froze ``delta``/10 from ``/etc/deerflow/config.yaml`` and whose file on disk
    still says the same. ``age_s`` backdates the last heartbeat.
    """
    from dashboard.fleet.models import ProcessRecord

    def make(role: str = "web", *, age_s: float = 0.0, stopped: bool = False, **fields) -> ProcessRecord:
        now = timezone.now()
        pid = fields.pop("pid", next(_pids))
        host = fields.pop("host", "host-1")
        mode = fields.pop("mode", "delta")
        frequency = fields.pop("snapshot_frequency", 10)
        config_sha = fields.pop("config_sha256", sha(f"{mode}/{frequency}"))
        values = {
            "instance_id": f"{role}-{pid}",
            "role": role,
            "name": f"{role}@{host}:{pid}",
            "host": host,
            "pid": pid,
            "started_at": now - dt.timedelta(hours=1),
            "last_heartbeat": now - dt.timedelta(seconds=age_s),
            "stopped_at": now if stopped else None,
            "mode": mode,
            "snapshot_frequency": frequency,
            "config_path": "/etc/deerflow/config.yaml",
            "config_sha256": config_sha,
            "max_supersteps": 5000,
            "versions": {"langgraph": "1.2.24"},
            "queues": ["dashboard", f"checkpoints.{mode}"] if role == "worker" else [],
            "disk_sha256": config_sha,
            "disk_mode": mode,
            "disk_snapshot_frequency": frequency,
            "heartbeat_interval_s": 15.0,
        }
        values.update(fields)
        return ProcessRecord.objects.create(**values)

    return make


#: A live check that could not run (the audit then relies on heartbeats only).
NO_LIVE = LiveCheck(False, error="not asked in this test")


@pytest.fixture
def api_token(staff_user) -> str:
    """A raw bearer token owned by the staff user, who may report heartbeats (``fleet.report_heartbeat``)."""
    from django.contrib.auth.models import Permission

    from dashboard.accounts.models import ApiToken

    staff_user.user_permissions.add(Permission.objects.get(codename="report_heartbeat"))

    _token, raw = ApiToken.issue(staff_user, name="fleet tests")
    return raw


@pytest.fixture
def live_maintenance_worker() -> None:
    """The registry tests register their own processes: no worker row unless a test makes one."""
    return None
