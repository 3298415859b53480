"""dashboard.fleet.control: the live check against real brokers.

The broadcast to real workers over Redis (the ``deerflow_facts`` replies) is
covered by tests/dashboard/fleet/test_acceptance_fleet.py; here the broker side alone.
"""

from __future__ import annotations

import time

import pytest
from celery import Celery

from dashboard.fleet.control import LiveCheck, deerflow_facts, live_check
from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.configs import write_config
from tests.integration import helpers


def _app(broker: str) -> Celery:
    app = Celery("fleet-control-test", set_as_current=False)
    app.conf.update(broker_url=broker, broker_connection_retry_on_startup=False)
    return app


def test_unreachable_broker_is_reported_quickly():
    app = _app(f"redis://127.0.0.1:{helpers.free_port()}/0")
    started = time.monotonic()
    try:
        result = live_check(app, timeout_s=0.5)
    finally:
        app.close()
    assert isinstance(result, LiveCheck)
    assert result.supported is False and result.replies == {}
    assert result.error.startswith("broker unreachable:")
    assert time.monotonic() - started < 3, "an unreachable broker must not hold the audit page"


def test_broker_with_no_workers_answers_empty():
    app = _app("memory://")
    try:
        result = live_check(app, timeout_s=0.3)
    finally:
        app.close()
    assert result.supported is True and result.replies == {} and result.error is None


@pytest.mark.redis
def test_redis_broker_with_no_workers_answers_empty():
    db = helpers.claim_empty_redis_db("fleet test_control")
    app = _app(helpers.redis_url(db))
    try:
        result = live_check(app, timeout_s=0.3)
    finally:
        app.close()
        helpers.flush_redis_db(db)
    assert result == LiveCheck(True, {}, None, 0.3)


def test_control_command_is_registered_under_its_own_name():
    from celery.worker.control import Panel

    assert Panel.data["deerflow_facts"] is deerflow_facts
    assert Panel.meta["deerflow_facts"].type == "control"


def test_embedded_filesystem_broker_broadcasts_to_a_real_worker(tmp_path):
    """The embedded default (Kombu's filesystem transport) can broadcast: a real worker answers."""
    fixtures_real.restore_sqlite(tmp_path / "data")
    (tmp_path / "var").mkdir()
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data")))
    env = helpers.dashboard_env(config_path=config, var_dir=tmp_path / "var")  # no CELERY_BROKER_URL
    helpers.run_manage(["migrate", "--noinput"], env)
    argv = [str(helpers.VENV_BIN / "celery"), "-A", "dashboard", "worker", "--loglevel=INFO", "--pool=solo",
            "-n", "embedded@%h", "--without-heartbeat", "--without-gossip", "--without-mingle"]
    proc = helpers.ManagedProcess.start("worker (filesystem broker)", argv, env, tmp_path / "worker.log")
    broker = tmp_path / "var" / "celery"
    app = Celery("fleet-control-fs", set_as_current=False)
    app.conf.update(broker_url="filesystem://", broker_transport_options={
        "data_folder_in": str(broker / "broker"), "data_folder_out": str(broker / "broker"),
        "processed_folder": str(broker / "processed"), "control_folder": str(broker / "control"),
        "store_processed": False})
    try:
        helpers.wait_for_log(proc, r" ready\.$", timeout=90)
        result = helpers.wait_until(lambda: (r := live_check(app, timeout_s=1.0)).replies and r,
                                    timeout=60, proc=proc, what="a live check reply over the filesystem broker")
    finally:
        app.close()
        proc.stop()
    assert result.supported
    [(node, facts)] = result.replies.items()
    assert node.startswith("embedded@")
    assert (facts["mode"], facts["snapshot_frequency"], facts["config_path"]) == ("delta", 10, str(config))
    assert facts["pid"] == proc.pid and facts["instance_id"]


@pytest.mark.parametrize("kind", [pytest.param("redis", marks=pytest.mark.redis),
                                  pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def test_the_live_audits_broadcast_reaches_a_real_worker_on_each_production_broker(tmp_path, kind):
    """``deerflow_facts`` goes out as a broadcast (Redis: pub/sub fanout; RabbitMQ: the ``celery.pidbox``
    fanout exchange) and a real worker on that broker replies with its frozen facts, nothing else."""
    fixtures_real.restore_sqlite(tmp_path / "data")
    (tmp_path / "var").mkdir()
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data")))
    with helpers.private_broker(kind, f"fleet test_control {kind}") as url:
        env = helpers.dashboard_env(config_path=config, var_dir=tmp_path / "var", CELERY_BROKER_URL=url)
        helpers.run_manage(["migrate", "--noinput", "-v0"], env)
        argv = [str(helpers.VENV_BIN / "celery"), "-A", "dashboard", "worker", "--loglevel=INFO", "--pool=solo",
                "-n", f"{kind}-live@%h", "--without-heartbeat", "--without-gossip", "--without-mingle"]
        proc = helpers.ManagedProcess.start(f"worker ({kind})", argv, env, tmp_path / "worker.log")
        app = _app(url)
        try:
            helpers.wait_for_log(proc, r" ready\.$", timeout=90)
            result = helpers.wait_until(lambda: (r := live_check(app, timeout_s=1.0)).replies and r,
                                        timeout=60, proc=proc, what=f"a live check reply over {kind}")
        finally:
            app.close()
            proc.stop()
    assert result.supported and result.error is None
    [(node, facts)] = result.replies.items()
    assert node.startswith(f"{kind}-live@")
    assert (facts["mode"], facts["snapshot_frequency"], facts["config_path"]) == ("delta", 10, str(config))
    assert facts["pid"] == proc.pid and facts["instance_id"] and "broker_url" not in facts
    assert "checkpoints.delta" in facts["queues"]
