"""A real Celery worker process against the machine's Redis runs ``threads.materialize_head``.

What this proves (issue 2, acceptance "A test drives the worker for real"):

* ``celery -A dashboard worker`` (prefork) started the way an operator starts
  it freezes mode and cadence from config.yaml in its main process, logs the
  frozen values, and subscribes itself to ``checkpoints.<mode>``
  (``celeryd_after_setup``) although it was started with ``-Q dashboard`` only.
* A task sent from this process over Redis is executed in a forked pool child
  of that worker (not in the test process), which inherited the freeze, and
  the result travels back through the Redis result backend.
* The delta worker's head message count, digest and checkpoint id equal the
  fixture manifest's values for the SQLite backend, for a long delta thread, a
  full thread, a subgraph thread (root and a ``research:<task>`` namespace), a
  marker-less delta thread and an empty thread.
* A worker started with a FULL-mode config.yaml is a maintenance process all
  the same: it freezes delta at the file's cadence, consumes ``checkpoints.delta``
  (never ``checkpoints.full``), reads delta threads like the manifest (the 409
  remedy runs where 409s happen) and full threads too.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from celery import Celery

from tests import fixtures_real
from tests.integration import helpers

pytestmark = pytest.mark.redis

TASK = "threads.materialize_head"
READY_TIMEOUT = 90
RESULT_TIMEOUT = 60


@pytest.fixture(scope="module")
def redis_db() -> Iterator[int]:
    """A random empty Redis db (1..15) private to this module; flushed afterwards."""
    db = helpers.claim_empty_redis_db(f"test_celery_worker pid={os.getpid()}")
    try:
        yield db
    finally:
        helpers.flush_redis_db(db)


@pytest.fixture(scope="module")
def client_app(redis_db: int) -> Iterator[Celery]:
    """A Celery client configured exactly like ``dashboard.celery.app``, on the test's Redis db.

    A separate app object (same ``CELERY_*`` Django settings, then broker and
    backend overridden) so the process-wide ``dashboard.celery.app`` other
    tests may use is left untouched.
    """
    url = helpers.redis_url(redis_db)
    app = Celery("dashboard-test-client", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.update(broker_url=url, result_backend=url, broker_transport_options={},
                    broker_connection_retry_on_startup=True)
    try:
        yield app
    finally:
        app.close()


@dataclass
class Worker:
    """A running worker: its process, frozen mode, config file and Celery node name."""

    proc: helpers.ManagedProcess
    mode: str
    config_path: Path
    hostname: str
    queue: str

    @property
    def pid(self) -> int:
        return self.proc.pid


def _start_worker(tmp: Path, mode: str, redis_db: int, app: Celery) -> Worker:
    config_path, var_dir = helpers.dashboard_home(tmp, mode)
    url = helpers.redis_url(redis_db)
    env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir,
                                CELERY_BROKER_URL=url, CELERY_RESULT_BACKEND=url)
    tag = f"{mode}-{uuid.uuid4().hex[:8]}"
    node, queue = f"{tag}@%h", f"only-{tag}"
    argv = [str(helpers.VENV_BIN / "celery"), "-A", "dashboard", "worker", "--loglevel=INFO",
            "--concurrency=1", "--pool=prefork", "-Q", f"dashboard,{queue}", "-n", node, "--without-heartbeat"]
    proc = helpers.ManagedProcess.start(f"celery worker ({mode})", argv, env, tmp / "worker.log")
    try:
        match = helpers.wait_for_log(proc, r"^.*\] (\S+@\S+) ready\.$", timeout=READY_TIMEOUT)
        hostname = match.group(1)

        def pong() -> bool:
            replies = app.control.ping(destination=[hostname], timeout=1.0) or []
            return any(hostname in reply for reply in replies)

        helpers.wait_until(pong, timeout=READY_TIMEOUT, proc=proc, what=f"control ping reply from {hostname}")
    except BaseException:
        proc.stop()
        raise
    return Worker(proc, mode, config_path, hostname, queue)


@pytest.fixture(scope="module")
def delta_worker(tmp_path_factory: pytest.TempPathFactory, redis_db: int,
                 client_app: Celery) -> Iterator[Worker]:
    """A real prefork worker frozen in delta mode (f10) on a private copy of the fixture SQLite."""
    worker = _start_worker(tmp_path_factory.mktemp("worker-delta"), "delta", redis_db, client_app)
    try:
        yield worker
    finally:
        worker.proc.stop()


@pytest.fixture(scope="module")
def full_worker(tmp_path_factory: pytest.TempPathFactory, redis_db: int,
                client_app: Celery) -> Iterator[Worker]:
    """A real prefork worker started with a full-mode config.yaml (it freezes delta) on its own fixture copy."""
    worker = _start_worker(tmp_path_factory.mktemp("worker-full"), "full", redis_db, client_app)
    try:
        yield worker
    finally:
        worker.proc.stop()


def _materialize(app: Celery, thread_id: str, queue: str, checkpoint_ns: str = "") -> dict:
    result = app.send_task(TASK, args=[thread_id], kwargs={"checkpoint_ns": checkpoint_ns}, queue=queue)
    try:
        return result.get(timeout=RESULT_TIMEOUT)
    finally:
        result.forget()


def _sqlite_head(thread_id: str, checkpoint_ns: str = "") -> dict:
    """The manifest's expected head of a namespace on the SQLite backend."""
    backend = fixtures_real.manifest_threads()[thread_id]["backends"]["sqlite"]
    if checkpoint_ns == "":
        head = backend["head"]
        return {"checkpoint_id": head["checkpoint_id"], "message_count": head["message_count"],
                "messages_sha256": head["messages_sha256"]}
    newest = next(c for c in backend["checkpoints"] if c["checkpoint_ns"] == checkpoint_ns)
    return {"checkpoint_id": newest["checkpoint_id"], "message_count": newest["message_count"],
            "messages_sha256": newest["messages_sha256"]}


def _namespaces(manifest: dict, thread_id: str) -> list[str]:
    thread = next(t for t in manifest["threads"] if t["thread_id"] == thread_id)
    return list(thread["backends"]["sqlite"]["namespace_checkpoint_counts"])


def _no_traceback(value: object) -> None:
    text = repr(value)
    assert "Traceback" not in text and "File \"" not in text, f"traceback leaked into the result: {text[:500]}"


@pytest.mark.parametrize("thread_id", [
    "delta-f10-50t",
    "full-tools-30t",
    "delta-f10-subgraph",
    "markerless-delta-f10-13t",
    "delta-f3-40t",
    "delta-empty",
])
def test_delta_worker_materializes_head_like_manifest(delta_worker, client_app, thread_id):
    expected = _sqlite_head(thread_id)
    result = _materialize(client_app, thread_id, "checkpoints.delta")

    _no_traceback(result)
    assert "error" not in result, result
    assert result["thread_id"] == thread_id
    assert result["mode"] == "delta"
    assert result["snapshot_frequency"] == 10
    assert result["checkpoint_id"] == expected["checkpoint_id"]
    assert result["message_count"] == expected["message_count"]
    assert result["messages_sha256"] == expected["messages_sha256"]
    # Ran in the worker's forked pool child, not here and not in the worker's main process.
    assert result["pid"] != os.getpid()
    assert result["pid"] != delta_worker.pid
    assert result["pid"] in helpers.child_pids(delta_worker.pid)


def test_delta_worker_materializes_subgraph_namespace(delta_worker, client_app, manifest):
    thread_id = "delta-f10-subgraph"
    namespaces = [ns for ns in _namespaces(manifest, thread_id) if ns]
    assert namespaces, "fixture thread has no subgraph namespace"
    for ns in namespaces:
        expected = _sqlite_head(thread_id, ns)
        result = _materialize(client_app, thread_id, "checkpoints.delta", checkpoint_ns=ns)
        assert "error" not in result, result
        assert result["checkpoint_id"] == expected["checkpoint_id"]
        assert (result["message_count"], result["messages_sha256"]) == (
            expected["message_count"], expected["messages_sha256"])


def test_worker_log_shows_freeze_before_ready_and_mode_queue(delta_worker, full_worker, client_app):
    for worker in (delta_worker, full_worker):
        proc = worker.proc
        log = proc.log()
        frozen = (f"(maintenance: delta whatever config.yaml's mode, here {worker.mode}): "
                  f"checkpoint_channel_mode=delta snapshot_frequency=10 config={worker.config_path}")
        lines = [line for line in log.splitlines() if frozen in line]
        assert lines, f"no frozen-mode line in {proc.log_path}:\n{proc.log_tail()}"
        assert "/MainProcess]" in lines[0], "the freeze must happen in the main process, before forking"
        assert "queue=checkpoints.delta" in lines[0]
        assert log.index(frozen) < log.index(" ready."), "worker was ready before it froze"

        queues = client_app.control.inspect([worker.hostname], timeout=5.0).active_queues() or {}
        names = {q["name"] for q in queues.get(worker.hostname, [])}
        assert "checkpoints.delta" in names and "checkpoints.full" not in names, names


@pytest.mark.parametrize("thread_id", ["delta-f10-9t", "delta-f10-50t", "full-tools-30t"])
def test_a_worker_on_a_full_mode_config_reads_every_thread(full_worker, client_app, thread_id):
    """The 409 remedy runs where 409s happen: a full fleet's worker reads delta threads (it froze delta)."""
    expected = _sqlite_head(thread_id)
    result = _materialize(client_app, thread_id, full_worker.queue)

    _no_traceback(result)
    assert "error" not in result, result
    assert (result["mode"], result["snapshot_frequency"]) == ("delta", 10)
    assert (result["checkpoint_id"], result["message_count"], result["messages_sha256"]) == (
        expected["checkpoint_id"], expected["message_count"], expected["messages_sha256"])
    assert result["pid"] in helpers.child_pids(full_worker.pid)
