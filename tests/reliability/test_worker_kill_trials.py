"""Kill trials: SIGKILL a Celery worker (its main process and its pool child) mid-thread, restart it, and the
job ends within one sweep interval, on Kombu's filesystem transport, Redis and RabbitMQ.

Each trial, on a fresh copy of the fixture SQLite:

1. a real prefork worker (one pool child) converts ``delta-f10-200t`` (752 checkpoints) in a job launched
   as the pages launch it;
2. while the child holds the conversion's write transaction, the child and the main process are SIGKILLed
   (the row stays ``running`` with the dead pid; the filesystem transport has already deleted the message);
3. a new worker starts, and one stalled-job sweep runs (``requeue_stalled_threads``: what the beat task
   ``jobs.requeue_stalled`` does every :data:`SWEEP_INTERVAL_S`);
4. the job must end within :data:`SWEEP_INTERVAL_S` of that sweep: ``succeeded`` with the thread fully
   converted (every checkpoint full, the manifest's head digest, one backup of this job), or ``failed`` with
   the thread untouched (still delta, no backup). Anything else is ``stranded`` (job not ended) or
   ``partial`` (thread neither).

``DFA_KILL_TRIALS`` (default 10) trials per broker; the summary line of each broker is printed (``-s``) and
recorded in docs/reliability.md.

The batch trials (``DFA_KILL_TRIALS_BATCH``, default 3 per broker) kill a worker the same way in the middle of
a batch: the thread summary is built first, so the job's three threads (``delta-f10-200t`` between two small
ones) go to the worker in one ``jobs.run_threads`` task. The killed thread must end as above, and the batch's
other threads must end converted: the one the worker never reached included, whose message died with the
worker on the filesystem broker.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.integration import helpers

pytestmark = pytest.mark.slow

THREAD = "delta-f10-200t"
CHECKPOINTS = 752
#: How often beat runs ``jobs.requeue_stalled`` (``CELERY_BEAT_SCHEDULE["jobs-requeue-stalled"]``).
SWEEP_INTERVAL_S = 60.0
TRIALS = int(os.environ.get("DFA_KILL_TRIALS", "10"))
BATCH_TRIALS = int(os.environ.get("DFA_KILL_TRIALS_BATCH", "3"))
#: The batch trials' job: the long thread between two small ones (one task, sizes known from the summary).
BATCH = ["delta-f10-10t", THREAD, "delta-f10-9t"]

LAUNCH_ONE = """
import json
from django.db import transaction
from dashboard.jobs import services
with transaction.atomic():
    job = services.create_job(None, "convert", {"thread_ids": %r},
                              services.JobOptions(confirmed=True, launched_by="kill-trial"))
    services.launch(job)
print("RESULT " + json.dumps({"job_id": job.pk}))
"""

BROKERS = [pytest.param("filesystem", id="filesystem"), pytest.param("redis", marks=pytest.mark.redis),
           pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)]


@pytest.fixture(params=BROKERS)
def home(request, tmp_path: Path) -> Iterator[dict]:
    kind = request.param
    if kind == "filesystem":
        yield {**helpers.migrated_home(tmp_path), "broker": kind}
        return
    with helpers.private_broker(kind, f"test_worker_kill_trials pid={os.getpid()}") as url:
        yield {**helpers.migrated_home(tmp_path, CELERY_BROKER_URL=url), "broker": kind}


def _start_worker(home: dict, n: int) -> helpers.ManagedProcess:
    return helpers.start_worker(home["env"], home["root"] / f"worker-{n}.log", node="kill", concurrency=1)


def _rows(var_dir: Path, sql: str, params=()) -> list[sqlite3.Row]:
    with sqlite3.connect(var_dir / "dash.sqlite3", timeout=10) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()


def _in_the_transaction(home: dict):
    """The newest job's row of :data:`THREAD`, once it is ``running`` and its worker holds the checkpoint file's
    write lock."""
    rows = _rows(home["var"], "SELECT * FROM jobs_threadresult WHERE thread_id = ? AND job_id = (SELECT MAX(id) "
                              "FROM jobs_conversionjob)", [THREAD])
    if not (rows and rows[0]["status"] == "running"):
        return False
    probe = sqlite3.connect(str(home["root"] / "data" / "deerflow.db"), timeout=0)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.rollback()
        return False
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc) and rows[0]
    finally:
        probe.close()


def _kill_mid_thread(home: dict, worker: helpers.ManagedProcess, threads: list[str]) -> tuple[int, int]:
    """Launch the job, SIGKILL the pool child and the main process inside :data:`THREAD`'s conversion.
    ``(job_id, child)``."""
    launched: list[int] = []

    def launch() -> None:
        proc = helpers.run_manage(["shell", "-c", LAUNCH_ONE % threads], home["env"])
        launched.append(json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[7:])["job_id"])

    launcher = threading.Thread(target=launch)
    launcher.start()
    try:
        row = helpers.wait_until(lambda: _in_the_transaction(home), timeout=180, interval=0.02, proc=worker,
                                 what="the conversion's transaction")
        child = row["worker_pid"]
        os.kill(child, signal.SIGKILL)
        os.kill(worker.pid, signal.SIGKILL)
    finally:
        launcher.join(timeout=180)
    worker.stop()  # reaps the group (nothing is left to signal)
    return launched[0], child


def _thread_outcome(home: dict, job_id: int) -> str:
    """``converted``, ``untouched`` or ``partial`` (see the module docstring)."""
    from deerflow import convert, inventory
    from deerflow.storage import open_checkpointer

    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(home["root"] / "data"))
    backups = [b for b in convert.list_backups(database, THREAD) if b.status == "active"]
    with open_checkpointer(database) as saver:
        summary = inventory.get_thread_summary(saver, THREAD)
    if (summary.checkpoint_count, summary.mode) == (CHECKPOINTS, "full") and \
            [b.note for b in backups] == [f"dashboard job {job_id}"]:
        return "converted"
    if (summary.checkpoint_count, summary.mode) == (CHECKPOINTS, "delta") and not backups:
        return "untouched"
    return "partial"


def _trial(home: dict, n: int, threads: tuple[str, ...] = (THREAD,)) -> dict:
    fixtures_real.restore_sqlite(home["root"] / "data")
    if len(threads) > 1:  # the sizes a batch is cut by
        helpers.run_manage(["refresh_inventory", "--full"], home["env"])
    worker = _start_worker(home, 2 * n)
    job_id, child = _kill_mid_thread(home, worker, list(threads))
    (stuck,) = _rows(home["var"], "SELECT status, worker_pid FROM jobs_threadresult WHERE job_id = ? AND "
                                  "thread_id = ?", [job_id, THREAD])
    restarted = _start_worker(home, 2 * n + 1)
    try:
        swept = time.monotonic()
        helpers.run_manage(["requeue_stalled_threads"], home["env"])

        def ended():
            (job,) = _rows(home["var"], "SELECT state FROM jobs_conversionjob WHERE id = ?", [job_id])
            return job["state"] in ("succeeded", "failed", "partially_failed", "cancelled") and job["state"]

        try:
            state = helpers.wait_until(ended, timeout=SWEEP_INTERVAL_S, proc=restarted, what="the job to end")
        except AssertionError:
            state = "stranded"
        took = time.monotonic() - swept
    finally:
        restarted.stop()
    rows = _rows(home["var"], "SELECT * FROM jobs_threadresult WHERE job_id = ? ORDER BY id", [job_id])
    (row,) = [r for r in rows if r["thread_id"] == THREAD]
    return {"trial": n, "killed_row_status": stuck["status"], "killed_pid": child, "state": state,
            "row": row["status"], "attempts": row["attempts"], "thread": _thread_outcome(home, job_id),
            "others": [r["status"] for r in rows if r["thread_id"] != THREAD],
            "batches": sorted({r["batch"] for r in rows if r["batch"] is not None}),
            "seconds_after_sweep": round(took, 1)}


def test_a_killed_worker_never_strands_a_job_nor_leaves_a_partial_thread(home):
    trials = [_trial(home, n) for n in range(TRIALS)]
    for t in trials:
        print(json.dumps(t))
    stranded = [t for t in trials if t["state"] == "stranded"]
    partial = [t for t in trials if t["thread"] == "partial"
               or (t["state"] == "succeeded") != (t["thread"] == "converted")]
    print(f"KILL TRIALS {home['broker']}: {len(trials)} trials, "
          f"{sum(t['state'] == 'succeeded' for t in trials)} succeeded, "
          f"{sum(t['state'] == 'failed' for t in trials)} failed untouched, {len(stranded)} stranded, "
          f"{len(partial)} partial; slowest end {max(t['seconds_after_sweep'] for t in trials)} s after the sweep")
    assert not stranded and not partial, trials
    assert all(t["killed_row_status"] == "running" for t in trials)  # the kill did land mid-thread


def test_a_worker_killed_mid_batch_leaves_no_thread_of_the_batch_behind(home):
    trials = [_trial(home, n, tuple(BATCH)) for n in range(BATCH_TRIALS)]
    for t in trials:
        print(json.dumps(t))
    print(f"KILL TRIALS (batch) {home['broker']}: {len(trials)} trials, "
          f"{sum(t['state'] == 'succeeded' for t in trials)} succeeded, "
          f"{sum(t['state'] == 'stranded' for t in trials)} stranded")
    assert all(t["killed_row_status"] == "running" for t in trials)  # the kill did land mid-thread
    assert all(len(t["batches"]) == 1 for t in trials)  # the three threads went to the worker in one task
    for t in trials:
        assert t["state"] != "stranded" and t["thread"] != "partial", t
        assert (t["state"] == "succeeded") == (t["thread"] == "converted"), t
        assert t["others"] == ["converted", "converted"], t  # the reached and the unreached thread alike
