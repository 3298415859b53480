"""A job of small threads on the demo's set-up: ``job_small_threads_per_s_demo``.

The embedded default as ``make demo`` runs it: SQLite checkpoints and dashboard tables, Kombu's filesystem
broker, one Celery worker started as the demo starts it (``--concurrency=1 -Q dashboard``). Twenty small delta
threads (2 to 4 turns) are seeded, a dry run of all of them is launched the way the pages launch one
(``create_job`` + ``launch``), and the key is the threads over the seconds from the job's creation to its end
(``created_at`` to ``finished_at`` on its row: the dispatch, every broker round trip and every thread's work).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Context

__all__ = ["run"]

ROOT = Path(__file__).resolve().parent.parent
THREADS = 20
_OWN = ("DJANGO_", "DASHBOARD_", "CELERY_", "DEER_FLOW_", "LANGGRAPH_")
_LAUNCH = """
import json
from django.db import transaction
from dashboard.jobs import services
from deerflow import inventory
from dashboard.runtime import get_runtime
ids = [s.thread_id for s in inventory.list_threads(get_runtime().saver, limit=500)[0]]
with transaction.atomic():
    job = services.create_job(None, "dry_run", {"thread_ids": ids}, services.JobOptions(launched_by="bench"))
    services.launch(job)
print("RESULT " + json.dumps({"job_id": job.pk, "threads": len(ids)}))
"""
_ENDED = ("succeeded", "failed", "partially_failed", "cancelled")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN)}
    (home / "config.yaml").write_text(
        f"database:\n  backend: sqlite\n  sqlite_dir: {home / 'data'}\n  checkpoint_channel_mode: delta\n"
        "  checkpoint_delta:\n    snapshot_frequency: 10\n")
    env.update(DJANGO_SETTINGS_MODULE="dashboard.settings", DJANGO_DEBUG="0",
               DJANGO_SECRET_KEY=secrets.token_urlsafe(40), DASHBOARD_VAR_DIR=str(home / "var"),
               DEER_FLOW_CONFIG_PATH=str(home / "config.yaml"), PYTHONUNBUFFERED="1")
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    if proc.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def _job_row(env: dict[str, str], job_id: int) -> dict[str, Any]:
    out = _manage(env, "shell", "-c", "import json; from dashboard.jobs.models import ConversionJob as J; "
                  f"j = J.objects.get(pk={job_id}); print('ROW ' + json.dumps({{'state': j.state, "
                  "'seconds': (j.finished_at - j.created_at).total_seconds() if j.finished_at else None, "
                  "'done': j.results.exclude(status__in=('pending', 'queued', 'running')).count()}))")
    return json.loads(next(x for x in out.splitlines() if x.startswith("ROW "))[4:])


def _wait_ready(log: Path, worker: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited {worker.returncode}: {log.read_text()[-2000:]}")
        if re.search(r"\] \S+@\S+ ready\.", log.read_text(errors="replace")):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the worker was not ready in {timeout} s: {log.read_text()[-2000:]}")


def run(ctx: Context) -> None:
    """Seed 20 small threads, start the demo's worker, time a dry run of all of them."""
    with tempfile.TemporaryDirectory(prefix="dfa-bench-jobs-") as tmp:
        home = Path(tmp)
        env = _env(home)
        _manage(env, "migrate", "--noinput", "-v0")
        _manage(env, "seed_threads", "--threads", str(THREADS), "--turns-min", "2", "--turns-max", "4",
                "--mode", "delta", "--seed", "bench-jobs")
        log = home / "worker.log"
        with open(log, "wb") as out:
            worker = subprocess.Popen([str(Path(sys.executable).parent / "celery"), "-A", "dashboard", "worker",
                                       "--loglevel=INFO", "--concurrency=1", "-Q", "dashboard"],
                                      cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_ready(log, worker)
            launched = json.loads(next(x for x in _manage(env, "shell", "-c", _LAUNCH).splitlines()
                                       if x.startswith("RESULT "))[7:])
            deadline = time.monotonic() + 300
            while (row := _job_row(env, launched["job_id"]))["state"] not in _ENDED:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the job did not end in 300 s: {row}")
                time.sleep(0.5)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    assert row["state"] == "succeeded" and row["done"] == launched["threads"] == THREADS, (row, launched)
    ctx.results["job_small_threads_per_s_demo"] = round(THREADS / row["seconds"], 1)
    ctx.log(f"  dry run of {THREADS} small threads on the filesystem broker, one worker: {row['seconds']:.2f} s "
            f"({THREADS / row['seconds']:.1f} threads/s)")
