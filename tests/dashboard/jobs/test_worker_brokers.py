"""A real delta-mode Celery worker (prefork; Redis and RabbitMQ brokers) runs a conversion job launched through
the service.

What this proves (issue 4, items 5 and 6):

* ``services.create_job`` + ``services.launch`` in a dashboard process send
  ``jobs.dispatch``; the worker, started as an operator starts it (``-Q
  dashboard`` only), also consumes ``checkpoints.delta`` because it froze
  delta mode, runs the thread tasks in its forked pool children (two in
  flight) and records host, node, pid, frozen mode and cadence per thread.
* The launch page's worker check sees that worker.
* Afterwards a full-mode dashboard runtime reads each converted thread's head
  and its canonical digest equals the manifest's.

Every test runs once per broker operators run (``redis``, ``rabbitmq`` markers),
each on a private Redis db or RabbitMQ virtual host. The time-limit test sets
the broker's own timeout short (Redis ``visibility_timeout``, RabbitMQ's
server ``consumer_timeout``) and shows a task that runs past the task time
limit derived from it is stopped and recorded once, never delivered again.

The dashboard's own tables live in a SQLite file shared by the launching
process and the worker (as in ``make demo``); this test reads it directly.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.digest import messages_sha256
from tests import fixtures_real
from tests.integration import helpers

THREADS = ["delta-f10-9t", "delta-f10-fork", "markerless-delta-f10-13t"]
READY_TIMEOUT = 90
JOB_TIMEOUT = 180

LAUNCH = """
import json
from django.db import transaction
from dashboard.jobs import services
from dashboard.jobs.workers import check_delta_workers
check = check_delta_workers(timeout=2.0)
with transaction.atomic():
    job = services.create_job(None, "convert", {"thread_ids": %s}, services.JobOptions(
        confirmed=True, max_in_flight=2, throttle_delay_s=0.2, launched_by="test_worker_brokers"))
    services.launch(job)
print("RESULT " + json.dumps({"job_id": job.pk, "check": check.state, "workers": check.workers}))
"""


BROKER_PARAMS = [pytest.param("redis", marks=pytest.mark.redis), pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)]


@pytest.fixture(params=BROKER_PARAMS)
def broker_kind(request) -> str:
    return request.param


@pytest.fixture
def broker_env() -> dict[str, str]:
    """Extra environment for the dashboard processes of one test (a test may add to it before ``home``)."""
    return {}


@pytest.fixture
def home(tmp_path: Path, broker_kind: str, broker_env: dict) -> Iterator[dict]:
    """A dashboard home (delta config.yaml, fixture SQLite copy, migrated dashboard DB) on a private broker."""
    with helpers.private_broker(broker_kind, f"test_worker_brokers pid={os.getpid()}") as url:
        yield {**helpers.migrated_home(tmp_path, CELERY_BROKER_URL=url, **broker_env), "broker": broker_kind}


@pytest.fixture
def worker(home: dict) -> Iterator[helpers.ManagedProcess]:
    proc = helpers.start_worker(home["env"], home["root"] / "worker.log", name="celery worker (delta)",
                                node="jobs-delta", concurrency=2, timeout=READY_TIMEOUT)
    try:
        yield proc
    finally:
        proc.stop()


def _dashboard_rows(var_dir: Path, sql: str, params=()) -> list[sqlite3.Row]:
    with sqlite3.connect(var_dir / "dash.sqlite3", timeout=10) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()


def _launch(home: dict) -> dict:
    proc = helpers.run_manage(["shell", "-c", LAUNCH % json.dumps(THREADS)], home["env"])
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_a_convert_job_runs_on_a_real_delta_worker(home, worker):
    launched = _launch(home)
    assert launched["check"] == "ok" and len(launched["workers"]) == 1, launched

    def finished():
        rows = _dashboard_rows(home["var"], "SELECT state FROM jobs_conversionjob WHERE id = ?", [launched["job_id"]])
        return rows and rows[0]["state"] in ("succeeded", "failed", "partially_failed", "cancelled") and rows[0]

    state = helpers.wait_until(finished, timeout=JOB_TIMEOUT, proc=worker, what="the job to finish")["state"]
    results = _dashboard_rows(home["var"], "SELECT * FROM jobs_threadresult WHERE job_id = ? ORDER BY id",
                              [launched["job_id"]])
    assert state == "succeeded", [dict(r) for r in results]

    children = helpers.child_pids(worker.pid)
    for r in results:
        assert r["status"] == "converted" and r["backup_id"] and r["error"] == ""
        assert (r["worker_mode"], r["worker_snapshot_frequency"]) == ("delta", 10)
        assert r["worker_node"] == launched["workers"][0] and r["worker_pid"] in children
        assert r["head_messages_sha256"] == _manifest_head(r["thread_id"])

    _assert_full_mode_reads_manifest_heads(DatabaseConfig(backend="sqlite", sqlite_dir=str(home["root"] / "data")))


def _manifest_head(thread_id: str) -> str:
    return fixtures_real.manifest_threads()[thread_id]["backends"]["sqlite"]["head"]["messages_sha256"]


def _assert_full_mode_reads_manifest_heads(database: DatabaseConfig, threads: list[str] = THREADS) -> None:
    """A full-mode dashboard runtime (lineage gate included) now serves every converted thread of ``threads``."""
    from dashboard.runtime import DashboardRuntime, install_runtime
    from dashboard.threads import services as thread_services
    from deerflow.config import load_config
    from tests.configs import write_config

    path = write_config(Path(database.sqlite_dir).parent / "config.full.yaml", database, "full")
    rt = DashboardRuntime.from_config(load_config(path))
    old = install_runtime(rt)
    try:
        for thread_id in threads:
            view = thread_services.read_state(rt, thread_id)
            assert messages_sha256(view.values["messages"]) == _manifest_head(thread_id), thread_id
    finally:
        rt.close()
        install_runtime(old)


KILL_THREAD = "delta-f10-200t"  # 752 checkpoints: the conversion holds the write lock for a while

LAUNCH_ONE = """
import json
from django.db import transaction
from dashboard.jobs import services
with transaction.atomic():
    job = services.create_job(None, "convert", {"thread_ids": [%r]},
                              services.JobOptions(confirmed=True, launched_by="kill-test"))
    services.launch(job)
print("RESULT " + json.dumps({"job_id": job.pk}))
"""


@pytest.mark.slow
def test_a_pool_child_killed_mid_thread_is_redelivered_and_the_job_finishes(home, worker):
    """SIGKILL the child converting a thread: its transaction rolls back, the task is redelivered
    (acks_late + reject_on_worker_lost), the row is reclaimed, and the thread ends fully converted."""
    import signal

    # The window (the conversion's transaction) can close before a loaded `manage.py shell` exits after
    # launching the job: watch the newest job's rows while the launch runs.
    import threading

    launched: list[int] = []

    def launch() -> None:
        proc = helpers.run_manage(["shell", "-c", LAUNCH_ONE % KILL_THREAD], home["env"])
        launched.append(json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])["job_id"])

    launcher = threading.Thread(target=launch)
    launcher.start()
    newest = "SELECT * FROM jobs_threadresult WHERE job_id = (SELECT MAX(id) FROM jobs_conversionjob)"

    checkpoints_db = home["root"] / "data" / "deerflow.db"

    def inside_the_conversion_transaction():
        # The converter holds SQLite's write lock from BEGIN IMMEDIATE to its commit: while the row
        # is running and the lock is taken, the child is mid-conversion (not before, not after).
        rows = _dashboard_rows(home["var"], newest, [])
        if not (rows and rows[0]["status"] == "running"):
            return False
        probe = sqlite3.connect(str(checkpoints_db), timeout=0)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.rollback()
            return False
        except sqlite3.OperationalError as exc:
            return "locked" in str(exc) and rows[0]
        finally:
            probe.close()
    try:
        victim = helpers.wait_until(inside_the_conversion_transaction, timeout=120, interval=0.02, proc=worker,
                                    what="the conversion's transaction")["worker_pid"]
        os.kill(victim, signal.SIGKILL)
    finally:
        launcher.join(timeout=120)
    (job_id,) = launched
    query = "SELECT * FROM jobs_threadresult WHERE job_id = ?"

    def finished():
        rows = _dashboard_rows(home["var"], "SELECT state FROM jobs_conversionjob WHERE id = ?", [job_id])
        return rows and rows[0]["state"] in ("succeeded", "failed", "partially_failed") and rows[0]["state"]
    state = helpers.wait_until(finished, timeout=JOB_TIMEOUT, proc=worker, what="the job to finish")
    (row,) = _dashboard_rows(home["var"], query, [job_id])
    assert state == "succeeded", dict(row)
    assert row["status"] == "converted" and row["attempts"] == 2 and row["worker_pid"] != victim
    assert row["head_messages_sha256"] == _manifest_head(KILL_THREAD)

    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(home["root"] / "data"))
    from deerflow import convert
    # The killed attempt left nothing behind.
    assert [b.note for b in convert.list_backups(database, KILL_THREAD)] == [f"dashboard job {job_id}"]
    from deerflow import inventory
    from deerflow.storage.savers import open_checkpointer
    with open_checkpointer(database) as saver:
        summary = inventory.get_thread_summary(saver, KILL_THREAD)
    assert (summary.checkpoint_count, summary.mode) == (752, "full")  # every checkpoint converted, none left delta


BROKER_TIMEOUT_S = 10  # the broker's own limit, set short (defaults: Redis 900 s here, RabbitMQ 30 min); the 9 s
# above the time limit cover the pool's kill and the acknowledgement on a loaded CI machine (4 s was once too little)
TIME_LIMIT_S = 1  # below it, as settings require
RABBITMQ_TICK_MS = 1000  # how often the server's channels check consumer_timeout (its default: once a minute)


@pytest.fixture
def short_broker_timeout(broker_kind: str, broker_env: dict) -> Iterator[float]:
    """The broker gives up on an unacknowledged task after BROKER_TIMEOUT_S; yields how long to wait to see it act.

    Redis: the visibility timeout is the dashboard's own transport option. RabbitMQ: ``consumer_timeout`` is the
    server's (set here for the test's channels, restored after); a channel checks it on each tick, once a minute
    by default, here every second (``channel_tick_interval``, restored after). The RabbitMQ tests share one
    xdist group, so no other test's channel sees these settings.
    """
    broker_env.update(DASHBOARD_TASK_TIME_LIMIT_S=str(TIME_LIMIT_S))
    if broker_kind == "redis":
        broker_env["DASHBOARD_TASK_VISIBILITY_TIMEOUT_S"] = str(BROKER_TIMEOUT_S)
        yield 3 * BROKER_TIMEOUT_S
        return
    broker_env["DASHBOARD_BROKER_CONSUMER_TIMEOUT_S"] = str(BROKER_TIMEOUT_S)
    previous = helpers.set_rabbitmq_consumer_timeout(BROKER_TIMEOUT_S * 1000)
    previous_tick = helpers.set_rabbitmq_channel_tick(RABBITMQ_TICK_MS)
    try:
        yield 3 * BROKER_TIMEOUT_S + 2 * RABBITMQ_TICK_MS / 1000
    finally:
        helpers.set_rabbitmq_channel_tick(previous_tick)
        helpers.set_rabbitmq_consumer_timeout(previous)


class _UnackedConsumer:
    """RabbitMQ only: a consumer holding one message unacknowledged, the control that the server's timeout acts.

    ``closed_by_server()`` drains the channel: the server's ``PRECONDITION_FAILED`` close once its
    ``consumer_timeout`` has struck (checked on the channel's tick).
    """

    QUEUE = "dfa-consumer-timeout-control"

    def __init__(self, broker_url: str) -> None:
        import amqp

        vhost = broker_url.rsplit("/", 1)[1]
        self.conn = amqp.Connection(host="127.0.0.1:5672", userid="guest", password="guest", virtual_host=vhost)
        self.conn.connect()
        channel = self.conn.channel()
        channel.queue_declare(self.QUEUE, auto_delete=True)
        channel.basic_publish(amqp.Message("hold me"), routing_key=self.QUEUE)
        self.received: list[Any] = []
        channel.basic_consume(self.QUEUE, callback=self.received.append, no_ack=False)
        self.conn.drain_events(timeout=10)
        assert len(self.received) == 1

    def closed_by_server(self) -> bool:
        import amqp

        try:
            self.conn.drain_events(timeout=1)
        except amqp.exceptions.PreconditionFailed:
            return True
        except TimeoutError:
            return False
        return False

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: S110 - already closed by the server
            pass


def _thread_ids(database: DatabaseConfig) -> set[str]:
    from deerflow import inventory
    from deerflow.storage.savers import open_checkpointer
    with open_checkpointer(database) as saver:
        return {s.thread_id for s in inventory.list_threads(saver, limit=500)[0]}


@pytest.mark.slow  # waits out the broker's timeout
def test_a_task_past_its_time_limit_is_recorded_once_and_never_delivered_again(short_broker_timeout, home, worker):
    """A conversion longer than the task time limit (derived below the broker's timeout) is stopped inside the
    task, its transaction rolls back, the row says ``time_limit`` -- and the broker never delivers it again.

    The fixture's longest thread now converts in about the 1 s limit, so the test seeds a 200-turn delta thread;
    whether the limit strikes before the commit, after it, or not at all on a fast run, the row must say what
    happened to the thread. The recording of each case is checked deterministically in
    ``tests/dashboard/jobs/test_services.py``."""
    import time

    from deerflow import inventory
    from deerflow.storage.savers import open_checkpointer

    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(home["root"] / "data"))
    before = _thread_ids(database)
    helpers.run_manage(["seed_threads", "--threads", "1", "--turns-min", "200", "--turns-max", "200",
                        "--mode", "delta", "--seed", "time-limit"], home["env"])
    (long_thread,) = _thread_ids(database) - before
    with open_checkpointer(database) as saver:
        checkpoints = inventory.get_thread_summary(saver, long_thread).checkpoint_count

    control = _UnackedConsumer(home["env"]["CELERY_BROKER_URL"]) if home["broker"] == "rabbitmq" else None
    try:
        proc = helpers.run_manage(["shell", "-c", LAUNCH_ONE % long_thread], home["env"])
        job_id = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])["job_id"]

        def finished():
            rows = _dashboard_rows(home["var"], "SELECT state FROM jobs_conversionjob WHERE id = ?", [job_id])
            return rows and rows[0]["state"] in ("succeeded", "failed", "partially_failed") and rows[0]["state"]
        state = helpers.wait_until(finished, timeout=JOB_TIMEOUT, proc=worker, what="the job to finish")
        time.sleep(short_broker_timeout)  # well past the broker's timeout and its check
        if control is not None:  # the server's timeout did act within the wait, on a consumer that earned it
            assert control.closed_by_server()
    finally:
        if control is not None:
            control.close()

    (row,) = _dashboard_rows(home["var"], "SELECT * FROM jobs_threadresult WHERE job_id = ?", [job_id])
    log = worker.log()
    assert len(re.findall(r"Task jobs\.run_threads?\[[^\]]+\] received", log)) == 1
    assert "PRECONDITION_FAILED" not in log and worker.alive()  # RabbitMQ never closed the worker's channel

    with open_checkpointer(database) as saver:
        summary = inventory.get_thread_summary(saver, long_thread)
    assert summary.checkpoint_count == checkpoints
    # Whatever the timing, the row tells the truth about the thread (and it ran once).
    if summary.mode == "delta":  # the limit struck before the commit: rolled back, nothing half-converted
        assert "TimeLimitExceeded" in log and state == "failed"
        assert (row["status"], row["error_code"], row["attempts"]) == ("error", "time_limit", 1), dict(row)
        assert "DASHBOARD_TASK_TIME_LIMIT_S" in row["hint"]
    else:  # converted: in time, or the limit struck between the commit and the recording
        assert state == "succeeded"
        assert (row["status"], row["error_code"], row["attempts"]) == ("converted", "", 1), dict(row)
        assert row["backup_id"]


@pytest.mark.slow
def test_a_locked_database_is_retried_through_the_broker_and_the_thread_converts(home, worker):
    """A writer holds the checkpoint database's write lock: the conversion gets ``database is locked``
    (transient), and the task is retried through the broker (a retry is a new message with a countdown);
    the lock is released and a retry converts the thread."""
    checkpoints_db = home["root"] / "data" / "deerflow.db"
    holder = sqlite3.connect(str(checkpoints_db), timeout=0, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        proc = helpers.run_manage(["shell", "-c", LAUNCH_ONE % THREADS[0]], home["env"])
        job_id = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])["job_id"]
        helpers.wait_for_log(worker, r"Task jobs\.run_threads?\[\S+\] retry: Retry in", timeout=120)
    finally:
        holder.rollback()
        holder.close()

    def finished():
        rows = _dashboard_rows(home["var"], "SELECT state FROM jobs_conversionjob WHERE id = ?", [job_id])
        return rows and rows[0]["state"] in ("succeeded", "failed", "partially_failed") and rows[0]["state"]
    state = helpers.wait_until(finished, timeout=JOB_TIMEOUT, proc=worker, what="the job to finish")
    (row,) = _dashboard_rows(home["var"], "SELECT * FROM jobs_threadresult WHERE job_id = ?", [job_id])
    assert state == "succeeded", dict(row)
    # Every retry the lock caused went through the broker and claimed the row once more (how many fell inside
    # the lock depends on the jittered countdowns); the last attempt converted.
    retries = len(re.findall(r"Task jobs\.run_threads?\[\S+\] retry: Retry in", worker.log()))
    assert retries >= 1 and (row["status"], row["attempts"], row["error"]) == ("converted", retries + 1, "")
    assert row["head_messages_sha256"] == _manifest_head(THREADS[0])
    assert "database is locked" in worker.log()


LAUNCH_FILTER = """
import json
from django.db import transaction
from dashboard.jobs import services
with transaction.atomic():
    job = services.create_job(None, "dry_run", {"filter": {"q": %r}},
                              services.JobOptions(max_in_flight=2, launched_by="filter-test"))
    services.launch(job)
    # counted before the commit: the worker cannot see the job yet, so every row counted is this process's
    rows = job.results.count()
print("RESULT " + json.dumps({"job_id": job.pk, "state": job.state, "rows": rows}))
"""


def test_a_filter_job_is_resolved_by_the_worker_and_runs(home, worker):
    proc = helpers.run_manage(["shell", "-c", LAUNCH_FILTER % "delta-f10-1"], home["env"])
    launched = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])
    assert (launched["state"], launched["rows"]) == ("resolving", 0)  # the launching process wrote no row

    def finished():
        rows = _dashboard_rows(home["var"], "SELECT state FROM jobs_conversionjob WHERE id = ?", [launched["job_id"]])
        return rows and rows[0]["state"] in ("succeeded", "failed", "partially_failed") and rows[0]["state"]
    state = helpers.wait_until(finished, timeout=JOB_TIMEOUT, proc=worker, what="the job to finish")
    rows = _dashboard_rows(home["var"], "SELECT * FROM jobs_threadresult WHERE job_id = ?", [launched["job_id"]])
    assert state == "succeeded", [dict(r) for r in rows]
    expected = {t for t, m in fixtures_real.manifest_threads().items()
                if "delta-f10-1" in t and m["write_mode"].startswith("delta")}
    assert expected and {r["thread_id"] for r in rows} == expected
    assert all(r["status"] == "needs_conversion" for r in rows)
    assert re.search(rf"job \d+: filter resolved to {len(expected)} threads", worker.log())
