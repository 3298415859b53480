"""The broker (a private Redis, no persistence) restarts while a real Celery worker runs a conversion job.

A Redis that keeps nothing on disk loses every message on restart. The job
here has two threads in flight on a worker with one pool process: one thread
runs, the other's ``jobs.run_thread`` message waits in the broker's queue.
The restart loses that message. What must hold:

* the worker reconnects by itself and the running thread is converted and
  recorded (its own transaction never depended on the broker);
* the job goes on with the threads it sends after the restart;
* the row whose message was lost stays ``queued`` -- the job cannot finish
  on its own -- and the job page says so;
* ``manage.py requeue_stalled_threads`` (the beat task's twin) sends it
  again, the job succeeds, and every converted thread reads in full mode
  with the manifest's head messages.

The shared Redis on 6379 is never restarted: this test runs its own
``redis-server`` on a free port.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from dashboard.jobs import owners
from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.integration import helpers

pytestmark = [pytest.mark.redis, pytest.mark.slow]  # restarts a (private) broker

#: The first thread has 752 checkpoints; its pool process is held (SIGSTOP) while the broker restarts under it.
THREADS = ["delta-f10-200t", "delta-f10-9t", "delta-f10-fork"]
JOB_TIMEOUT = 240

LAUNCH = """
import json
from django.db import transaction
from dashboard.jobs import services
with transaction.atomic():
    job = services.create_job(None, "convert", {"thread_ids": %s}, services.JobOptions(
        confirmed=True, max_in_flight=%d, launched_by="test_broker_restart"))
    services.launch(job)
print("RESULT " + json.dumps({"job_id": job.pk}))
"""


class PrivateRedis:
    """``redis-server`` on a free port, keeping nothing on disk; :meth:`restart` loses every message."""

    def __init__(self, root: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.binary, self.root, self.port = binary, root, helpers.free_port()
        self.proc: helpers.ManagedProcess | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> None:
        self.starts += 1
        argv = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.root)]
        self.proc = helpers.ManagedProcess.start("redis-server", argv, {}, self.root / f"redis-{self.starts}.log")
        helpers.wait_until(self._pong, timeout=20, proc=self.proc, what="redis-server to answer PING")

    def _pong(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.exceptions.ConnectionError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def home(tmp_path: Path, broker: PrivateRedis) -> dict:
    config_path, var_dir = helpers.dashboard_home(tmp_path / "home", "delta")
    env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir, CELERY_BROKER_URL=broker.url,
                                CELERY_RESULT_BACKEND=broker.url)
    helpers.run_manage(["migrate", "--noinput", "-v0"], env)
    return {"env": env, "root": tmp_path / "home", "var": var_dir}


@pytest.fixture
def start_worker(home: dict) -> Iterator[Callable[[int], helpers.ManagedProcess]]:
    """Factory: ``start_worker(concurrency)`` starts a delta worker (prefork) and waits until it is ready."""
    started: list[helpers.ManagedProcess] = []

    def start(concurrency: int) -> helpers.ManagedProcess:
        argv = [str(helpers.VENV_BIN / "celery"), "-A", "dashboard", "worker", "--loglevel=INFO",
                f"--concurrency={concurrency}", "--pool=prefork", "-Q", "dashboard",
                "-n", f"restart-{uuid.uuid4().hex[:8]}@%h", "--without-heartbeat"]
        proc = helpers.ManagedProcess.start("celery worker (delta)", argv, home["env"], home["root"] / "worker.log")
        started.append(proc)
        helpers.wait_for_log(proc, r"^.*\] (\S+@\S+) ready\.$", timeout=90)
        return proc

    yield start
    for proc in started:
        proc.stop()


def _launch(home: dict, thread_ids: list[str], max_in_flight: int) -> int:
    """Create and launch a conversion job from a dashboard process; returns its id."""
    proc = helpers.run_manage(["shell", "-c", LAUNCH % (json.dumps(thread_ids), max_in_flight)], home["env"])
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])["job_id"]


def _launch_and_wait(home: dict, thread_ids: list[str], max_in_flight: int, predicate: Callable[[], Any],
                     worker: helpers.ManagedProcess, what: str,
                     then: Callable[[Any], None] = lambda value: None) -> tuple[int, Any]:
    """Launch a job, wait for ``predicate`` *while* the launch runs, then call ``then(value)`` at once.

    The windows these tests act in (a thread converting) last a second or two, and the launching
    ``manage.py shell`` may take longer than that to exit on a loaded machine. This dashboard database is
    new, so the predicate may read every row as the job's.

    Returns:
        ``(job_id, the predicate's truthy value)``.
    """
    launched: list[int] = []
    launcher = threading.Thread(target=lambda: launched.append(_launch(home, thread_ids, max_in_flight)))
    launcher.start()
    try:
        value = helpers.wait_until(predicate, timeout=60, interval=0.02, proc=worker, what=what)
        then(value)
    finally:
        launcher.join(timeout=120)
    (job_id,) = launched
    return job_id, value


@contextlib.contextmanager
def _paused(home: dict, pid: int) -> Iterator[None]:
    """Hold the pool process ``pid`` (SIGSTOP) for the block, then let it go on (SIGCONT).

    The windows these tests act in are "while a thread converts"; a stopped owner keeps that window open
    however loaded the machine is (a conversion takes a second or two). The process exists throughout, and its
    Celery node still lists the task as active. It is stopped only outside a write on the dashboard database
    (checked with ``BEGIN IMMEDIATE``), so the rest of the worker can still claim and decline rows.
    """
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        try:
            with contextlib.closing(sqlite3.connect(home["var"] / "dash.sqlite3", timeout=0.05)) as conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.rollback()
            break
        except sqlite3.OperationalError:  # stopped inside a write: let it finish and try again
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.01)
    else:
        raise AssertionError(f"pool process {pid} was inside a dashboard-database write 200 times running")
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _rows(home: dict, job_id: int | None) -> list[dict]:
    """The job's thread rows by id (``job_id=None``: every job's)."""
    with sqlite3.connect(home["var"] / "dash.sqlite3", timeout=10) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(
            "SELECT id, thread_id, status, attempts, head_messages_sha256, worker_node, worker_pid "
            "FROM jobs_threadresult "
            "WHERE job_id = ? OR ? IS NULL ORDER BY id", [job_id, job_id])]


def _job_state(home: dict, job_id: int) -> str:
    with sqlite3.connect(home["var"] / "dash.sqlite3", timeout=10) as conn:
        return conn.execute("SELECT state FROM jobs_conversionjob WHERE id = ?", [job_id]).fetchone()[0]


def _queue_length(broker: PrivateRedis) -> int:
    return int(broker.client().llen("checkpoints.delta"))


def test_a_broker_restart_mid_job_loses_a_queued_task_and_requeue_finishes_the_job(home, broker, start_worker):
    worker = start_worker(1)  # one pool process: one thread runs, the next one's message waits in the broker

    def one_running_one_waiting():
        rows = _rows(home, None)
        statuses = [r["status"] for r in rows]
        ok = statuses.count("running") == 1 and statuses.count("queued") == 1 and _queue_length(broker) == 1
        return rows if ok else None

    def restart(rows):  # while the first thread still converts (held there): the waiting message is gone with it
        with _paused(home, next(r["worker_pid"] for r in rows if r["status"] == "running")):
            broker.restart()
            assert _queue_length(broker) == 0  # before the job sends its next thread

    job_id, rows = _launch_and_wait(home, THREADS, 2, one_running_one_waiting, worker,
                                    "one thread running and the next one's message waiting in the broker",
                                    then=restart)
    running = next(r for r in rows if r["status"] == "running")
    lost = next(r for r in rows if r["status"] == "queued")

    # The worker reconnects; the running thread is recorded and the job sends (and runs) the third thread.
    def the_rest_done():
        rows = {r["id"]: r for r in _rows(home, job_id)}
        others = [r for rid, r in rows.items() if rid != lost["id"]]
        return all(r["status"] == "converted" for r in others) and rows[lost["id"]]["status"] == "queued"

    helpers.wait_until(the_rest_done, timeout=JOB_TIMEOUT, proc=worker, what="the threads not lost to finish")
    assert next(r for r in _rows(home, job_id) if r["id"] == running["id"])["attempts"] == 1
    time.sleep(3)  # nothing will ever take the lost row
    assert next(r for r in _rows(home, job_id) if r["id"] == lost["id"])["status"] == "queued"
    assert _job_state(home, job_id) == "running" and _queue_length(broker) == 0

    dry = helpers.run_manage(["requeue_stalled_threads", "--older-than", "0", "--dry-run"], home["env"])
    assert dry.stdout.strip() == "1 thread task queued for more than 0 s past their due time."
    sent = helpers.run_manage(["requeue_stalled_threads", "--older-than", "0"], home["env"])
    assert sent.stdout.splitlines() == [f"sent again: job {job_id} thread {lost['thread_id']} (row {lost['id']})",
                                        "1 thread task sent again."]

    helpers.wait_until(lambda: _job_state(home, job_id) == "succeeded", timeout=JOB_TIMEOUT, proc=worker,
                       what="the job to succeed")
    rows = _rows(home, job_id)
    assert [r["status"] for r in rows] == ["converted"] * len(THREADS)
    manifest = fixtures_real.manifest_threads()
    for r in rows:
        assert r["head_messages_sha256"] == manifest[r["thread_id"]]["backends"]["sqlite"]["head"]["messages_sha256"]

    from tests.dashboard.jobs.test_worker_brokers import _assert_full_mode_reads_manifest_heads

    _assert_full_mode_reads_manifest_heads(DatabaseConfig(backend="sqlite", sqlite_dir=str(home["root"] / "data")),
                                           THREADS)


#: A thread of 1,200 checkpoints; its owner is held (SIGSTOP) mid-conversion while the blip lands.
BLIP_THREAD = "delta-f100-150t"


def test_a_connection_blip_redelivers_the_running_task_and_the_live_owner_keeps_its_thread(home, broker,
                                                                                         start_worker):
    """Redis drops the worker's connections (no data lost): Kombu restores the running task's message, marked
    redelivered, and the worker's second pool process takes it while the first still converts the thread."""
    worker2 = start_worker(2)  # two pool processes: the restored message can start beside the running one

    def one_running():
        rows = _rows(home, None)
        return rows if [r["status"] for r in rows] == ["running"] else None

    with contextlib.ExitStack() as held:  # the owner held mid-conversion until the redelivered copy has declined
        def hold(rows):
            held.enter_context(_paused(home, rows[0]["worker_pid"]))

        job_id, (running,) = _launch_and_wait(home, [BLIP_THREAD], 1, one_running, worker2, "the thread to run",
                                              then=hold)
        # Seen from another host, the owner's node is asked what it runs.
        app = Celery("owner-check", broker=broker.url, set_as_current=False)
        elsewhere = {"worker_host": "another-host", "worker_pid": 1, "worker_node": running["worker_node"]}
        assert owners.owner_alive(elsewhere, running["id"], app=app) is True
        assert owners.owner_alive(elsewhere, running["id"] + 1000, app=app) is False

        killed = broker.client().client_kill_filter(_type="normal", skipme=True)
        assert killed >= 1
        helpers.wait_for_log(worker2, r"Restoring 1 unacknowledged message", timeout=30)
        # The redelivered copy runs in the other pool process beside the (living) owner and declines the row.
        declined = (r"run_threads\[\S+\] succeeded in [\d.]+s: \{'result_ids': \[" + str(running["id"])
                    + r"\], 'statuses': \['\w+'\], 'ran': 0\}")
        helpers.wait_for_log(worker2, declined, timeout=30)
        assert _rows(home, job_id)[0]["status"] == "running"
    helpers.wait_until(lambda: _job_state(home, job_id) == "succeeded", timeout=JOB_TIMEOUT, proc=worker2,
                       what="the job to succeed")
    (row,) = _rows(home, job_id)
    assert (row["status"], row["attempts"]) == ("converted", 1), row
    assert owners.owner_alive({**elsewhere, "worker_node": "nobody@nowhere"}, row["id"], app=app, timeout=0.5) is None
