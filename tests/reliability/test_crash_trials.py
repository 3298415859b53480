"""Crash safety by fault injection: SIGKILL a process in the middle of converting a thread of the real
fixture, then check every thread of the database, then let the conversion run again.

Two kinds of trial, both backends:

* **Forked converters** (:func:`test_sigkill_forked_converters`, 25 kills per backend). A long-lived
  "zygote" process imports the runtime once and forks one child per conversion, the way Celery's
  prefork pool forks its workers; the child calls ``convert_thread`` (integrity check on, as jobs
  run it) on a private copy of the fixture and is killed with SIGKILL at a random moment: a seeded
  delay drawn uniformly from 0 to the conversion time measured for that thread and backend by an
  unkilled calibration run. A delay that lands after the child already finished is not counted as
  a kill; trials continue until 25 live children were killed. Then 4 more kills per backend aimed
  at the commit: 0-10 ms after the converter's ``before_commit`` hook reported (every row written and
  verified; the watermark check and the commit follow), so both outcomes are exercised.
* **A real Celery worker** (:func:`test_sigkill_celery_worker`, 3 trials per backend). A delta-mode
  ``celery worker`` (prefork, Redis broker) runs a conversion job of the dashboard
  (``jobs.dispatch`` -> ``jobs.run_thread`` -> ``services.run_thread``); once the job's row is
  ``running`` the whole worker (main process and pool child) is SIGKILLed after a random delay. A new
  worker is then started: the unacknowledged task comes back from the broker (a short Redis
  visibility timeout stands in for the default hour), the row is reclaimed, and the job must end
  ``succeeded`` with the thread converted.

After every kill the invariant checker (:func:`tests.reliability.support.classify`) classifies every
thread of the database: byte-identical to the original rows, or completely converted and verified
(full-mode accessor reads every checkpoint with the manifest's digest, no delta metadata left, one
backup holding the original rows). Anything else is ``partial``; there must be none. Then the
conversion runs again ("the job completes after restart") and the thread must be converted.

Each trial is recorded (backend, kind, thread, delay, outcome) and the summary is printed at the end
of the module. Reproduce: ``DFA_CRASH_SEED=<seed> .venv/bin/pytest -m slow tests/reliability/test_crash_trials.py``.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import list_backups
from tests.backends import BACKENDS
from tests.configs import write_config
from tests.deerflow.convert.support import settle
from tests.integration import helpers
from tests.reliability import support

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("DFA_CRASH_SEED", "20251130"))
KILLS_PER_BACKEND = 25
CELERY_THREADS = {"sqlite": ["delta-f10-50t", "delta-f10-fork", "migrated-full20-delta20"],
                  "postgres": ["delta-f3-40t", "delta-f10-subgraph", "markerless-delta-f10-13t"]}
VISIBILITY_TIMEOUT_S = 3
#: Extra kills aimed at the commit: 0-COMMIT_WINDOW_S seconds after the converter's ``before_commit`` hook.
COMMIT_KILLS = 4
COMMIT_WINDOW_S = 0.01

ZYGOTE = r"""
import json, os, sys, time, traceback
import psycopg, langgraph.checkpoint.postgres, langgraph.checkpoint.sqlite  # noqa: F401 - imported before forking
from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import convert_thread

def say(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()

say(event="zygote", pid=os.getpid())
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            database = DatabaseConfig(**request["database"])
            say(event="ready", pid=os.getpid())
            started = time.monotonic()
            hook = (lambda session: say(event="before_commit", pid=os.getpid())) if request.get("signal_commit") else None
            report = convert_thread(database, request["thread"], integrity=True, before_commit=hook)
            say(event="done", pid=os.getpid(), status=report.status, attempts=report.attempts,
                seconds=time.monotonic() - started, error=report.error)
        except BaseException:
            say(event="crash", pid=os.getpid(), traceback=traceback.format_exc())
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    say(event="exit", pid=pid, signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None)
"""  # noqa: E501 - the child's source, byte for byte (a raw string: a line in it cannot be wrapped)


@dataclass
class Trial:
    """One kill and what the checker found."""

    backend: str
    kind: str  # "forked" or "celery"
    thread: str
    delay_s: float
    typical_s: float
    outcome: str  # untouched / converted / partial
    problems: list[str] = field(default_factory=list)
    restart: str = ""


# -- the zygote ------------------------------------------------------------------


class Zygote:
    """A process that has imported the runtime and forks one converting child per request."""

    def __init__(self, log_dir: Path):
        self._stderr = tempfile.TemporaryFile(mode="w+", dir=log_dir)
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.next("zygote", timeout=60)["pid"] == self.proc.pid

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.events.put(json.loads(line))
        self.events.put({"event": "eof"})

    def next(self, *wanted: str, timeout: float) -> dict[str, Any]:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"zygote: no {wanted} within {timeout}s; stderr: {self.stderr()}") from None
        if event["event"] not in wanted:
            raise AssertionError(f"zygote: expected {wanted}, got {event}; stderr: {self.stderr()}")
        return event

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-4000:]

    def start(self, database: DatabaseConfig, thread: str, *, signal_commit: bool = False) -> int:
        """Fork a child converting ``thread``; returns its pid once it is about to convert.
        With ``signal_commit`` the child reports ``before_commit`` from the converter's hook."""
        request = {"database": database.model_dump(), "thread": thread, "signal_commit": signal_commit}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self.next("ready", timeout=60)["pid"]

    def convert(self, database: DatabaseConfig, thread: str) -> dict[str, Any]:
        """An unkilled child: returns its ``done`` event (with the parent-side wall time in ``wall_s``)."""
        self.start(database, thread)
        started = time.monotonic()
        done = self.next("done", "crash", timeout=300)
        done["wall_s"] = time.monotonic() - started
        assert done["event"] == "done", done
        assert self.next("exit", timeout=60)["signal"] is None
        return done

    def kill_after(self, database: DatabaseConfig, thread: str, delay: float) -> bool:
        """A child killed with SIGKILL ``delay`` seconds after it is ready. False when it finished first."""
        pid = self.start(database, thread)
        deadline = time.monotonic() + delay
        try:
            event = self.events.get(timeout=delay)
        except queue.Empty:
            event = None
        if event is None:
            time.sleep(max(0.0, deadline - time.monotonic()))
            return self._kill(pid, database, thread)
        assert event["event"] == "done", event
        assert self.next("exit", timeout=60)["signal"] is None
        return False

    def _kill(self, pid: int, database: DatabaseConfig, thread: str) -> bool:
        """SIGKILL the child; True when the kill ended it (not when it had already finished).

        Returns once the child's transaction has ended on the server too (:func:`settle`)."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it finished and was reaped just before
        ended = self.next("exit", "done", timeout=60)
        if ended["event"] == "done":  # finished in the last instant
            ended = self.next("exit", timeout=60)
        settle(database, thread)  # the killed child's server backend may still be committing
        return ended["signal"] == signal.SIGKILL

    def kill_at_commit(self, database: DatabaseConfig, thread: str, delay: float) -> bool:
        """A child killed ``delay`` seconds after the converter's ``before_commit`` hook ran (every row
        written and verified; the watermark check and the commit follow within milliseconds)."""
        pid = self.start(database, thread, signal_commit=True)
        self.next("before_commit", timeout=300)
        time.sleep(delay)
        return self._kill(pid, database, thread)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._stderr.close()


# -- fixtures --------------------------------------------------------------------


@dataclass
class Lab:
    """One backend: the pristine fixture, a zygote, and the measured conversion time of each thread."""

    backend: str
    pristine: support.Pristine
    zygote: Zygote
    typical_s: dict[str, float]
    workdir: Path


@pytest.fixture(scope="module")
def ledger(request: pytest.FixtureRequest) -> Iterator[list[Trial]]:
    """Every trial of the module; the summary is written to the terminal at the end."""
    trials: list[Trial] = []
    yield trials
    lines = [f"crash trials (seed {SEED}): {len(trials)} kills"]
    for (backend, kind), group in sorted(_groups(trials).items()):
        counts = Counter(t.outcome for t in group)
        lines.append(f"  {backend:8} {kind:7} trials={len(group):3} untouched={counts['untouched']:3} "
                     f"converted={counts['converted']:3} partial={counts['partial']}")
    for t in trials:
        lines.append(f"    {t.backend:8} {t.kind:7} {t.thread:26} delay={t.delay_s:6.3f}s/{t.typical_s:6.3f}s "
                     f"-> {t.outcome:9} restart: {t.restart}")
    out = os.environ.get("DFA_CRASH_SUMMARY")
    if out:
        Path(out).write_text(json.dumps({"seed": SEED, "trials": [asdict(t) for t in trials]}, indent=1))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)


def _groups(trials: list[Trial]) -> dict[tuple[str, str], list[Trial]]:
    out: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        out.setdefault((t.backend, t.kind), []).append(t)
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    backend = request.param
    workdir = tmp_path_factory.mktemp(f"crash-{backend}")
    pristine = support.make_pristine(backend, workdir / "pristine")
    zygote = None
    try:
        zygote = Zygote(workdir)
        typical = {}
        for thread in support.THREADS:  # calibration: one unkilled conversion per thread
            with support.private_copy(pristine, workdir / "calibration") as database:
                done = zygote.convert(database, thread)
                assert done["status"] == "converted", done
                typical[thread] = done["wall_s"]
        yield Lab(backend, pristine, zygote, typical, workdir)
    finally:
        if zygote is not None:
            zygote.close()
        support.drop_pristine(pristine)


def _check(database: DatabaseConfig, lab: Lab, manifest: dict, thread: str,
           before: dict[str, dict[str, str]]) -> tuple[str, list[str]]:
    """Classify every thread; the other threads must not have changed at all. Returns the thread's verdict."""
    now = support.fingerprints(database)
    verdicts = support.classify(database, lab.pristine, manifest, now)
    outcome, problems = verdicts[thread]
    others = [f"{t}: {v}" for t, v in verdicts.items() if t != thread and v[0] == "partial"]
    changed = [f"{t} changed" for t in lab.pristine.threads if t != thread
               and any(now[table].get(t) != before[table].get(t) for table in now)]
    if others or changed:
        return "partial", problems + others + changed
    return outcome, problems


def _converted_after_restart(database: DatabaseConfig, lab: Lab, manifest: dict, thread: str) -> list[str]:
    """After the restart the thread itself must be completely converted and verified."""
    verdict, problems = support.classify(database, lab.pristine, manifest, threads=[thread])[thread]
    return [] if verdict == "converted" else [f"after restart: {verdict}", *problems]


# -- forked converters ----------------------------------------------------------


def test_sigkill_forked_converters(lab: Lab, manifest: dict, ledger: list[Trial]) -> None:
    rng = random.Random(f"{SEED}-{lab.backend}-forked")
    trials: list[Trial] = []
    finished_first = 0
    plan = [("forked", t) for t in range(KILLS_PER_BACKEND)] + [("commit", t) for t in range(COMMIT_KILLS)]
    while len(trials) < len(plan):
        kind, n = plan[len(trials)]
        thread = support.THREADS[n % len(support.THREADS)]
        typical = lab.typical_s[thread]
        delay = rng.uniform(0.0, typical) if kind == "forked" else rng.uniform(0.0, COMMIT_WINDOW_S)
        with support.private_copy(lab.pristine, lab.workdir / "trial") as database:
            kill = lab.zygote.kill_after if kind == "forked" else lab.zygote.kill_at_commit
            if not kill(database, thread, delay):
                finished_first += 1  # the child finished before its kill: not a kill trial, draw again
                assert finished_first <= KILLS_PER_BACKEND, "too many children finished before their kill"
                continue
            outcome, problems = _check(database, lab, manifest, thread, lab.pristine.fingerprints)
            # the restarted worker: a fresh child converts (or finds the thread already converted)
            done = lab.zygote.convert(database, thread)
            restart = done["status"]
            expected = "converted" if outcome == "untouched" else "already_full"
            after = _converted_after_restart(database, lab, manifest, thread)
            if restart != expected or after:
                problems, outcome = problems + [f"restart: {restart} (expected {expected})", *after], "partial"
        trial = Trial(lab.backend, kind, thread, round(delay, 4), round(typical, 4), outcome, problems, restart)
        trials.append(trial)
        ledger.append(trial)
    print(f"[{lab.backend}] {finished_first} drawn delays landed after the child had finished (drawn again)")

    partial = [t for t in trials if t.outcome == "partial"]
    assert partial == [], f"seed {SEED}: partial outcomes: {partial}"
    random_kills = [t for t in trials if t.kind == "forked"]
    assert len(random_kills) == KILLS_PER_BACKEND
    assert min(Counter(t.thread for t in random_kills).values()) >= KILLS_PER_BACKEND // len(support.THREADS)


# -- a real Celery worker ---------------------------------------------------------

WORKER = (
    "import sys\n"
    "from dashboard.celery import app\n"
    f"app.conf.update(broker_transport_options={{'visibility_timeout': {VISIBILITY_TIMEOUT_S}, "
    "'unacked_restore_interval': 1, 'unacked_restore_throttle': 1})\n"
    "app.worker_main(['worker', *sys.argv[1:]])\n"
)

CREATE_JOBS = """
import json
from dashboard.jobs import services
from dashboard.jobs.models import ThreadResult
from tests.conftest import register_live_worker
register_live_worker(heartbeat_interval_s=3600)  # the trial's workers start next: the launch admits the jobs
out = {}
for thread in %s:
    job = services.create_job(None, "convert", {"thread_ids": [thread]},
                              services.JobOptions(confirmed=True, launched_by="crash-trials"))
    out[thread] = {"job_id": job.pk, "result_id": ThreadResult.objects.get(job=job).pk}
print("RESULT " + json.dumps(out))
"""


def _dash(var_dir: Path, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
    with closing(sqlite3.connect(var_dir / "dash.sqlite3", timeout=10)) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()


def _row_started(var_dir: Path, result_id: int) -> sqlite3.Row | None:
    row = _dash(var_dir, "SELECT status, worker_pid FROM jobs_threadresult WHERE id = ?", (result_id,))[0]
    return row if row["status"] not in ("pending", "queued") else None


def _job_finished(var_dir: Path, job_id: int) -> str | None:
    state = _dash(var_dir, "SELECT state FROM jobs_conversionjob WHERE id = ?", (job_id,))[0]["state"]
    return state if state in ("succeeded", "failed", "partially_failed", "cancelled") else None


def _start_worker(env: dict[str, str], root: Path, n: int) -> helpers.ManagedProcess:
    node = f"crash-{n}-{uuid.uuid4().hex[:6]}@%h"
    argv = [helpers.PYTHON, "-c", WORKER, "--loglevel=INFO", "--concurrency=1", "--pool=prefork", "-Q",
            "dashboard", "-n", node, "--without-heartbeat", "--without-mingle", "--without-gossip"]
    proc = helpers.ManagedProcess.start(f"celery worker #{n}", argv, env, root / f"worker-{n}.log")
    helpers.wait_for_log(proc, r"^.*\] (\S+@\S+) ready\.$", timeout=90)
    return proc


@pytest.mark.redis
def test_sigkill_celery_worker(lab: Lab, manifest: dict, ledger: list[Trial], tmp_path: Path) -> None:
    from celery import Celery

    rng = random.Random(f"{SEED}-{lab.backend}-celery")
    threads = CELERY_THREADS[lab.backend]
    database = support.copy_database(lab.pristine, tmp_path / "data")
    redis_db = helpers.claim_empty_redis_db(f"reliability crash trials pid={os.getpid()}")
    workers: list[helpers.ManagedProcess] = []
    producer = None
    trials: list[Trial] = []
    try:
        url = helpers.redis_url(redis_db)
        var_dir = tmp_path / "var"
        var_dir.mkdir()
        env = helpers.dashboard_env(config_path=write_config(tmp_path / "config.yaml", database), var_dir=var_dir,
                                    CELERY_BROKER_URL=url, CELERY_RESULT_BACKEND=url)
        helpers.run_manage(["migrate", "--noinput", "-v0"], env)
        created = helpers.run_manage(["shell", "-c", CREATE_JOBS % json.dumps(threads)], env)
        jobs = json.loads(next(x for x in created.stdout.splitlines() if x.startswith("RESULT "))[7:])
        producer = Celery("crash-trials-producer", broker=url, set_as_current=False)
        workers.append(_start_worker(env, tmp_path, 0))

        for thread in threads:
            job_id, result_id = jobs[thread]["job_id"], jobs[thread]["result_id"]
            before = support.fingerprints(database)
            typical = lab.typical_s[thread]
            delay = rng.uniform(0.0, typical)
            # what services.launch sends once the job is committed
            producer.send_task("jobs.dispatch", args=[job_id], queue="dashboard")
            row = helpers.wait_until(lambda rid=result_id: _row_started(var_dir, rid), timeout=60, interval=0.01,
                                     proc=workers[-1], what=f"{thread} to start")
            time.sleep(delay)
            os.killpg(workers[-1].pid, signal.SIGKILL)  # the whole worker: main process and pool child
            workers[-1].popen.wait(timeout=30)
            workers[-1].stop()
            late = "" if row["status"] == "running" else f" (the row was already {row['status']} at the kill)"
            outcome, problems = _check(database, lab, manifest, thread, before)

            # restart: a new worker gets the unacknowledged task back from the broker and finishes the job
            workers.append(_start_worker(env, tmp_path, len(workers)))
            state = helpers.wait_until(lambda jid=job_id: _job_finished(var_dir, jid), timeout=120,
                                       proc=workers[-1], what=f"job {job_id} to finish after the restart")
            result = dict(_dash(var_dir, "SELECT * FROM jobs_threadresult WHERE id = ?", (result_id,))[0])
            after = _converted_after_restart(database, lab, manifest, thread)
            restart = f"job {state}, row {result['status']} after {result['attempts']} claim(s){late}"
            if state != "succeeded" or result["status"] != "converted" or after:
                problems, outcome = problems + [f"restart: {restart}: {result['error']}", *after], "partial"
            notes = [b.note for b in list_backups(database, thread)]
            if notes != [f"dashboard job {job_id}"]:
                problems, outcome = problems + [f"backups after restart: {notes}"], "partial"
            trial = Trial(lab.backend, "celery", thread, round(delay, 4), round(typical, 4), outcome, problems,
                          restart)
            trials.append(trial)
            ledger.append(trial)
    finally:
        if producer is not None:
            producer.close()
        for worker in workers:
            worker.stop()
        helpers.flush_redis_db(redis_db)
        support.drop_copy(database)

    partial = [t for t in trials if t.outcome == "partial"]
    assert partial == [], f"seed {SEED}: partial outcomes: {partial}"
    assert len(trials) == len(threads)

