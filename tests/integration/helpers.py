"""Subprocess helpers for tests that run the dashboard for real: workers, web servers, configs.

Everything here starts OS processes the way an operator would (``celery -A
dashboard worker``, ``manage.py runserver``) with an environment built from
scratch for one test, and stops them by process id in teardown: SIGTERM to
the process group the helper created, then SIGKILL when it does not exit.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.configs import write_config

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PYTHON = str(Path(sys.executable))
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379

#: Environment variables the dashboard (or LangGraph, e.g. LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT) reads;
#: never inherited from the test process.
_OWN_PREFIXES = ("DJANGO_", "DASHBOARD_", "CELERY_", "DEER_FLOW_", "LANGGRAPH_")


#: Under pytest-xdist, worker ``gwN`` hands out ports from its own block of this many ports starting at
#: ``_PORT_BASE + N * _PORT_BLOCK`` (below Linux's ephemeral range, 32768+), so two workers never pick the same
#: port between one's check and its server's bind. A serial run lets the kernel choose.
_PORT_BASE, _PORT_BLOCK = 20000, 500
_next_port = 0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (from this xdist worker's own block, if any)."""
    global _next_port
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    base = _PORT_BASE + int(worker[2:]) * _PORT_BLOCK
    for _ in range(_PORT_BLOCK):
        port = base + _next_port
        _next_port = (_next_port + 1) % _PORT_BLOCK
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {base}..{base + _PORT_BLOCK - 1} for xdist worker {worker}")


def dashboard_home(root: Path, mode: str) -> tuple[Path, Path]:
    """A private copy of the fixture SQLite under ``root/data`` and a ``mode`` config.yaml for it.

    Returns ``(config_path, var_dir)``.
    """
    root.mkdir(parents=True, exist_ok=True)
    fixtures_real.restore_sqlite(root / "data")
    var_dir = root / "var"
    var_dir.mkdir(exist_ok=True)
    return write_config(root / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(root / "data")),
                        mode), var_dir


def dashboard_env(*, config_path: Path, var_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a dashboard process (web or worker).

    The test process's own ``DJANGO_*`` / ``DASHBOARD_*`` / ``CELERY_*`` /
    ``DEER_FLOW_*`` / ``LANGGRAPH_*`` variables are dropped so nothing leaks in; ``extra``
    overrides the defaults (``DJANGO_DEBUG=1``, Django tables in ``var_dir``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN_PREFIXES)}
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update({
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DJANGO_DEBUG": "1",
        "DASHBOARD_VAR_DIR": str(var_dir),
        "DASHBOARD_DATABASE_URL": f"sqlite:///{var_dir / 'dash.sqlite3'}",
        "DEER_FLOW_CONFIG_PATH": str(config_path),
    })
    env.update(extra)
    return env


def migrated_home(root: Path, mode: str = "delta", **extra: str) -> dict:
    """A dashboard home under ``root`` (:func:`dashboard_home`) whose dashboard database is migrated.

    Args:
        root: the test's directory.
        mode: the config.yaml's checkpoint channel mode.
        extra: environment variables over :func:`dashboard_env`'s (``CELERY_BROKER_URL=...``).

    Returns:
        ``{"env": the processes' environment, "root": root, "var": the dashboard's var directory}``.
    """
    config_path, var_dir = dashboard_home(root, mode)
    env = dashboard_env(config_path=config_path, var_dir=var_dir, **extra)
    run_manage(["migrate", "--noinput", "-v0"], env)
    return {"env": env, "root": root, "var": var_dir}


def run_manage(args: Sequence[str], env: Mapping[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python manage.py <args>`` to completion; raise with its output when it fails.

    ``timeout`` (seconds) only guards against a hang: under pytest-xdist on a loaded 2-core machine a
    ``migrate`` was seen to take over 120 s.
    """
    proc = subprocess.run([PYTHON, "manage.py", *args], cwd=REPO_ROOT, env=dict(env),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


@dataclass
class ManagedProcess:
    """A child process in its own session, its combined output in ``log_path``."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen
    _log_file: object = field(repr=False, default=None)

    @classmethod
    def start(cls, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ManagedProcess:
        log_file = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        popen = subprocess.Popen(list(argv), cwd=REPO_ROOT, env=dict(env), stdout=log_file,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        return cls(name=name, argv=list(argv), log_path=log_path, popen=popen, _log_file=log_file)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def fail(self, why: str) -> AssertionError:
        state = "running" if self.alive() else f"exited with {self.popen.returncode}"
        return AssertionError(f"{self.name} (pid {self.pid}, {state}): {why}\n--- log tail ({self.log_path}) ---\n"
                              f"{self.log_tail()}")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the process group this helper created, then SIGKILL what is left."""
        try:
            if self.alive():
                os.killpg(self.pid, signal.SIGTERM)
                try:
                    self.popen.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
            # The leader may be gone while pool children linger: kill the whole group.
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        finally:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None


def wait_until(predicate: Callable[[], object], *, timeout: float, interval: float = 0.25,
               proc: ManagedProcess | None = None, what: str = "condition") -> object:
    """Poll ``predicate`` until it returns a truthy value; fail early if ``proc`` dies."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and not proc.alive():
            raise proc.fail(f"exited while waiting for {what}")
        if time.monotonic() > deadline:
            if proc is not None:
                raise proc.fail(f"timed out after {timeout:.0f}s waiting for {what}")
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_for_log(proc: ManagedProcess, pattern: str, timeout: float = 60) -> re.Match:
    """Wait until ``proc``'s log matches the regular expression ``pattern``."""
    rx = re.compile(pattern, re.MULTILINE)
    return wait_until(lambda: rx.search(proc.log()), timeout=timeout, proc=proc, what=f"log /{pattern}/")


#: What a Celery worker logs once it consumes (``[... INFO/MainProcess] celery@host ready.``).
WORKER_READY = r"^.*\] (\S+@\S+) ready\.$"


def start_worker(env: Mapping[str, str], log_path: Path, *, name: str = "celery worker", node: str = "worker",
                 concurrency: int = 1, timeout: float = 120) -> ManagedProcess:
    """A prefork Celery worker started as an operator starts one (``celery -A dashboard worker -Q dashboard``:
    it adds the ``checkpoints.<mode>`` queue of the mode it froze), returned once it logged that it is ready.

    Args:
        env: its environment (:func:`dashboard_env`).
        log_path: where its combined output goes.
        name: how failures name it.
        node: its node name's prefix; a random suffix keeps two workers of one broker apart (``node-1a2b3c4d@%h``).
        concurrency: pool children.
        timeout: seconds to wait for it to be ready.

    Raises:
        AssertionError: it exited or was not ready within ``timeout`` (it is stopped first; the log tail says why).
    """
    argv = [str(VENV_BIN / "celery"), "-A", "dashboard", "worker", "--loglevel=INFO", f"--concurrency={concurrency}",
            "--pool=prefork", "-Q", "dashboard", "-n", f"{node}-{uuid.uuid4().hex[:8]}@%h", "--without-heartbeat"]
    proc = ManagedProcess.start(name, argv, env, log_path)
    try:
        wait_for_log(proc, WORKER_READY, timeout=timeout)
    except BaseException:
        proc.stop()
        raise
    return proc


def wait_http(url: str, proc: ManagedProcess, timeout: float = 60) -> int:
    """Wait until ``url`` answers HTTP at all (any status); returns the first status seen."""

    def probe() -> int | None:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - local test server
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return None

    return wait_until(probe, timeout=timeout, proc=proc, what=f"HTTP {url}")


def redis_url(db: int) -> str:
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"


def claim_empty_redis_db(owner: str) -> int:
    """Pick a random empty Redis db in 1..15 and claim it with a marker key; returns its number.

    Raises:
        AssertionError: Redis is unreachable or every db 1..15 holds keys.
    """
    import random

    import redis

    candidates = list(range(1, 16))
    random.shuffle(candidates)
    for db in candidates:
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db, socket_timeout=5)
        try:
            if client.dbsize() == 0 and client.set("dfa-test-claim", owner, nx=True):
                if client.dbsize() == 1:
                    return db
                client.delete("dfa-test-claim")
        except redis.ConnectionError as exc:
            raise AssertionError(f"Redis at {REDIS_HOST}:{REDIS_PORT} is not reachable: {exc}") from exc
        finally:
            client.close()
    raise AssertionError("no empty Redis database among 1..15 to run the worker test in")


def flush_redis_db(db: int) -> None:
    import redis

    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db, socket_timeout=5)
    try:
        client.flushdb()
    finally:
        client.close()


def child_pids(pid: int) -> set[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return {int(p) for p in path.read_text().split()}
    except OSError:
        return set()


RABBITMQ_HOST, RABBITMQ_PORT = "127.0.0.1", 5672
#: The brokers a real worker is tested on; a test parametrized with these runs once per broker.
BROKERS = ("redis", "rabbitmq")


def rabbitmq_url(vhost: str) -> str:
    return f"amqp://guest:guest@{RABBITMQ_HOST}:{RABBITMQ_PORT}/{vhost}"


def _rabbitmqctl(*args: str) -> str:
    proc = subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"rabbitmqctl {' '.join(args)} exited {proc.returncode}: {proc.stderr or proc.stdout}"
                             " (is RabbitMQ running on 127.0.0.1:5672? .ci/run starts it)")
    return proc.stdout


def claim_rabbitmq_vhost(owner: str) -> str:
    """A new, empty RabbitMQ virtual host for one test (guest may use it); returns its name."""
    vhost = f"dfa-test-{uuid.uuid4().hex[:10]}"
    _rabbitmqctl("add_vhost", vhost, "--description", owner)
    _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    return vhost


def drop_rabbitmq_vhost(vhost: str) -> None:
    _rabbitmqctl("delete_vhost", vhost)


def _set_rabbit_env(key: str, value: int | None) -> int | None:
    """Set (``None``: unset) the RabbitMQ server's ``rabbit`` application setting ``key``; the previous value
    (``None`` if it was unset). Server-wide, read by channels opened from now on: restore it in teardown."""
    match = re.search(r"\{ok,(\d+)\}", _rabbitmqctl("eval", f"application:get_env(rabbit, {key})."))
    if value is None:
        _rabbitmqctl("eval", f"application:unset_env(rabbit, {key}).")
    else:
        _rabbitmqctl("eval", f"application:set_env(rabbit, {key}, {int(value)}).")
    return int(match.group(1)) if match else None


def set_rabbitmq_consumer_timeout(ms: int) -> int:
    """Set the RabbitMQ server's ``consumer_timeout`` (milliseconds) for channels opened from now on; returns the
    previous value. A server-wide setting (RabbitMQ < 3.12 has no per-queue one): restore it in teardown."""
    previous = _set_rabbit_env("consumer_timeout", ms)
    return 1_800_000 if previous is None else previous


def set_rabbitmq_channel_tick(ms: int | None) -> int | None:
    """Set how often the RabbitMQ server's channels check their consumers' ``consumer_timeout`` (milliseconds;
    ``None``: the server's default, once a minute) for channels opened from now on; returns the previous value
    (``None`` if it was the default). Server-wide, like :func:`set_rabbitmq_consumer_timeout`."""
    return _set_rabbit_env("channel_tick_interval", ms)


class private_broker:  # noqa: N801 - used as a context manager, like contextlib's
    """``with private_broker("redis" | "rabbitmq", owner) as url:`` an empty broker for one test, emptied after."""

    def __init__(self, kind: str, owner: str) -> None:
        if kind not in BROKERS:
            raise ValueError(f"unknown broker {kind!r}; expected one of {BROKERS}")
        self.kind, self.owner = kind, owner

    def __enter__(self) -> str:
        if self.kind == "redis":
            self._db = claim_empty_redis_db(self.owner)
            return redis_url(self._db)
        self._vhost = claim_rabbitmq_vhost(self.owner)
        return rabbitmq_url(self._vhost)

    def __exit__(self, *exc: object) -> None:
        if self.kind == "redis":
            flush_redis_db(self._db)
        else:
            drop_rabbitmq_vhost(self._vhost)
