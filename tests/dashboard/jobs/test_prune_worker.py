"""A real delta-mode Celery worker (prefork, Redis broker) runs prune jobs, on SQLite and on Postgres (issue 12).

* SQLite: an enabled retention policy that is due is run by ``jobs.run_due_policies`` (the task function Celery
  beat calls every minute), called in a dashboard process; the prune job it starts (runner ``celery``, launched by
  ``policy:<name>``) is dispatched to the worker, which prunes the thread in a forked pool child frozen in delta
  mode; the thread then holds exactly the kept checkpoints, and its head reads with the manifest's digest.
* Postgres: a prune dry run, then the prune confirmed from it, both run by the worker against a private restore
  of the fixture dump; the kept checkpoints are those the dry run listed, with a backup per thread.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow import inventory
from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.digest import messages_sha256
from deerflow.storage.savers import open_checkpointer
from tests import fixtures_real
from tests.configs import write_config
from tests.integration import helpers

pytestmark = pytest.mark.redis

READY_TIMEOUT = 90
JOB_TIMEOUT = 180
THREAD = "delta-f10-10t"

POLICY = """
import datetime as dt, json
from django.utils import timezone
from dashboard.jobs import tasks
from dashboard.jobs.models import RetentionPolicy
RetentionPolicy.objects.create(name="keep-4", filter={"q": %r}, idle_days=0, rule="keep_last", keep_last=4,
                               schedule="* * * * *", enabled=True, created_at=timezone.now() - dt.timedelta(minutes=2))
print("RESULT " + json.dumps(tasks.run_due_policies()))
"""

DRY_RUN = """
import json
from django.db import transaction
from dashboard.jobs import services
with transaction.atomic():
    job = services.create_job(None, "prune_dry_run", {"thread_ids": %s}, services.JobOptions(
        launched_by="test_prune_worker", retention={"rule": "keep_last", "keep_last": 3}))
    services.launch(job)
print("RESULT " + json.dumps({"job_id": job.pk}))
"""

CONFIRM = """
import json
from django.db import transaction
from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
with transaction.atomic():
    job = services.create_job(None, "prune", None, services.JobOptions(
        source_job=ConversionJob.objects.get(pk=%d), confirmed=True, launched_by="test_prune_worker",
        retention={"backup": True}, max_in_flight=2))
    services.launch(job)
print("RESULT " + json.dumps({"job_id": job.pk}))
"""


def _home(tmp_path: Path, database: DatabaseConfig | None) -> Iterator[dict]:
    db = helpers.claim_empty_redis_db(f"test_prune_worker pid={os.getpid()}")
    try:
        config_path, var_dir = helpers.dashboard_home(tmp_path, "delta")
        if database is not None:
            config_path = write_config(tmp_path / "config.pg.yaml", database, "delta")
        else:
            database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data"))
        url = helpers.redis_url(db)
        env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir, CELERY_BROKER_URL=url,
                                    CELERY_RESULT_BACKEND=url)
        helpers.run_manage(["migrate", "--noinput", "-v0"], env)
        node = f"prune-delta-{uuid.uuid4().hex[:8]}@%h"
        argv = [str(helpers.VENV_BIN / "celery"), "-A", "dashboard", "worker", "--loglevel=INFO", "--concurrency=2",
                "--pool=prefork", "-Q", "dashboard", "-n", node, "--without-heartbeat"]
        proc = helpers.ManagedProcess.start("celery worker (delta)", argv, env, tmp_path / "worker.log")
        try:
            helpers.wait_for_log(proc, r"^.*\] (\S+@\S+) ready\.$", timeout=READY_TIMEOUT)
            yield {"env": env, "var": var_dir, "worker": proc, "database": database}
        finally:
            proc.stop()
    finally:
        helpers.flush_redis_db(db)


@pytest.fixture
def sqlite_home(tmp_path: Path) -> Iterator[dict]:
    yield from _home(tmp_path, None)


@pytest.fixture
def postgres_home(tmp_path: Path, postgres_fixture_db_rw: DatabaseConfig) -> Iterator[dict]:
    yield from _home(tmp_path, postgres_fixture_db_rw)


def _shell(home: dict, code: str) -> dict:
    proc = helpers.run_manage(["shell", "-c", code], home["env"])
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])


def _rows(home: dict, sql: str, params=()) -> list[sqlite3.Row]:
    with sqlite3.connect(home["var"] / "dash.sqlite3", timeout=10) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()


def _finish(home: dict, job_id: int) -> tuple[str, list[sqlite3.Row]]:
    def finished():
        rows = _rows(home, "SELECT * FROM jobs_conversionjob WHERE id = ?", [job_id])
        return rows and rows[0]["state"] in ("succeeded", "failed", "partially_failed", "cancelled") and rows[0]

    job = helpers.wait_until(finished, timeout=JOB_TIMEOUT, proc=home["worker"], what=f"job {job_id} to finish")
    return job, _rows(home, "SELECT * FROM jobs_threadresult WHERE job_id = ? ORDER BY id", [job_id])


def _checkpoint_ids(database: DatabaseConfig, thread_id: str) -> list[str]:
    with open_checkpointer(database) as saver:
        return sorted(t.config["configurable"]["checkpoint_id"] for t in saver.list(
            {"configurable": {"thread_id": thread_id}}))


def test_a_due_policy_runs_as_a_prune_job_on_a_real_worker_sqlite(sqlite_home):
    ran = _shell(sqlite_home, POLICY % THREAD)
    (entry,) = ran["ran"]
    assert entry["policy"] == "keep-4" and entry["error"] == "" and entry["job_id"]
    job, results = _finish(sqlite_home, entry["job_id"])
    assert job["state"] == "succeeded", [dict(r) for r in results]
    assert (job["kind"], job["runner"], job["launched_by"]) == ("prune", "celery", "policy:keep-4")
    (row,) = results
    lists = json.loads(row["prune"])
    assert row["status"] == "pruned" and row["backup_id"] and row["worker_mode"] == "delta"
    assert row["worker_pid"] in helpers.child_pids(sqlite_home["worker"].pid)
    assert _checkpoint_ids(sqlite_home["database"], THREAD) == sorted(lists["kept_checkpoint_ids"])
    assert row["checkpoints_rewritten"] == len(lists["deleted_checkpoint_ids"]) > 0
    head = fixtures_real.manifest_threads()[THREAD]["backends"]["sqlite"]["head"]
    with open_checkpointer(sqlite_home["database"]) as saver:
        assert inventory.get_thread_summary(saver, THREAD).head_checkpoint_id == head["checkpoint_id"]
    from dashboard.runtime import DashboardRuntime, install_runtime
    from dashboard.threads import services as thread_services
    from deerflow.config import load_config

    rt = DashboardRuntime.from_config(load_config(sqlite_home["env"]["DEER_FLOW_CONFIG_PATH"]))
    old = install_runtime(rt)
    try:
        view = thread_services.read_state(rt, THREAD)
        assert messages_sha256(view.values["messages"]) == head["messages_sha256"]
    finally:
        rt.close()
        install_runtime(old)


@pytest.mark.postgres
def test_a_prune_dry_run_then_prune_on_a_real_worker_postgres(postgres_home):
    threads = [THREAD, "full-short-3t"]
    dry_id = _shell(postgres_home, DRY_RUN % json.dumps(threads))["job_id"]
    job, previews = _finish(postgres_home, dry_id)
    assert job["state"] == "succeeded", [dict(r) for r in previews]
    planned = {r["thread_id"]: json.loads(r["prune"]) for r in previews}
    assert {r["status"] for r in previews} == {"would_prune"}

    prune_id = _shell(postgres_home, CONFIRM % dry_id)["job_id"]
    job, results = _finish(postgres_home, prune_id)
    assert job["state"] == "succeeded", [(r["thread_id"], r["status"], r["error"], r["hint"]) for r in results]
    for r in results:
        assert r["status"] == "pruned" and r["backup_id"] and r["worker_mode"] == "delta"
        assert _checkpoint_ids(postgres_home["database"], r["thread_id"]) == sorted(
            planned[r["thread_id"]]["kept_checkpoint_ids"])
