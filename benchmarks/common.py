"""What every benchmark shares: scratch databases, timing, runtimes, the machine description.

Timing rule: every figure is a median of repeated runs measured in this
process (or in fresh subprocesses where memory is measured), and every
ratio compares two figures measured side by side in one run on the same data.
"""

from __future__ import annotations

import datetime as dt
import gc
import multiprocessing
import os
import platform
import shutil
import sqlite3
import statistics
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psycopg
import yaml

from deerflow.config.database_config import DatabaseConfig

__all__ = ["Context", "copy_database", "machine", "median_ms", "runtime_for", "scratch_database", "served", "served_ms",
           "timed"]

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass
class Context:
    """One benchmark run's settings and the results collected so far.

    Attributes:
        scale: ``"small"`` (1k threads, shorter threads) or ``"full"`` (the issue's sizes).
        admin_url: a Postgres URL allowed to create and drop databases.
        results: flat ``{key: number or string}`` every benchmark adds to.
        notes: lines for the markdown report.
        log: progress output (``print`` by default).
    """

    scale: str = "full"
    admin_url: str = DEFAULT_ADMIN_URL
    results: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    log: Callable[[str], None] = print

    @property
    def full(self) -> bool:
        """True at full scale."""
        return self.scale == "full"


@contextmanager
def scratch_database(ctx: Context, prefix: str) -> Iterator[DatabaseConfig]:
    """A new Postgres database for one benchmark, dropped afterwards (its sessions terminated)."""
    name = f"dfa_bench_{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ctx.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(ctx.admin_url, dbname=name)
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        with psycopg.connect(ctx.admin_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                         "AND pid <> pg_backend_pid()", (name,))
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


@contextmanager
def copy_database(ctx: Context, database: DatabaseConfig, prefix: str) -> Iterator[DatabaseConfig]:
    """A byte-identical copy of a scratch database (``CREATE DATABASE ... TEMPLATE``), dropped afterwards."""
    source = psycopg.conninfo.conninfo_to_dict(database.postgres_url or "")["dbname"]
    name = f"dfa_bench_{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ctx.admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (source,))
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=psycopg.conninfo.make_conninfo(ctx.admin_url,
                                                                                             dbname=name))
    finally:
        with psycopg.connect(ctx.admin_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                         "AND pid <> pg_backend_pid()", (name,))
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """``(seconds, result)`` of one call (garbage collection settled first)."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median_ms(fn: Callable[[], Any], repeats: int, *, warmup: int = 1) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls after ``warmup`` calls (milliseconds)."""
    for _ in range(warmup):
        fn()
    return round(statistics.median(timed(fn)[0] for _ in range(repeats)) * 1000, 3)


def runtime_for(database: DatabaseConfig, mode: str, snapshot_frequency: int = 10) -> Any:
    """A dashboard runtime on ``database`` in ``mode`` from a real config.yaml, not frozen (benchmarks read both
    modes). The config's temporary directory goes when the runtime is collected, or at exit."""
    from dashboard.runtime import DashboardRuntime
    from deerflow.config import load_config

    block = {"backend": database.backend, "postgres_url": database.postgres_url, "checkpoint_channel_mode": mode,
             "checkpoint_delta": {"snapshot_frequency": snapshot_frequency}}
    path = Path(tempfile.mkdtemp(prefix="dfa-bench-")) / "config.yaml"
    path.write_text(yaml.safe_dump({"database": block}), encoding="utf-8")
    rt = DashboardRuntime.from_config(load_config(path), freeze=False)
    weakref.finalize(rt, shutil.rmtree, path.parent, True)  # the drift check reads the file while rt lives
    return rt


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


def machine(ctx: Context) -> dict[str, Any]:
    """nproc, memory, CPU model, load, versions (Python, Postgres, SQLite, LangGraph, psycopg, Django), Django's
    ``DEBUG`` at start, and the date."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    mem_kb = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), 0)
    from django.conf import settings as django_settings

    with psycopg.connect(ctx.admin_url) as conn:
        server = conn.execute("SHOW server_version").fetchone()[0]
        shared = conn.execute("SHOW shared_buffers").fetchone()[0]
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "cpu_model": cpu,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "postgres": server,
        "postgres_shared_buffers": shared,
        "sqlite": sqlite3.sqlite_version,
        "django_debug_at_start": bool(django_settings.DEBUG),  # served pages run with DEBUG off either way
        **{pkg: _version(pkg) for pkg in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres",
                                          "langgraph-checkpoint-sqlite", "psycopg", "Django")},
    }


@contextmanager
def served(rt: Any) -> Iterator[Any]:
    """A logged-in staff :class:`django.test.Client` whose requests ``rt`` serves (pages end to end, as served).

    The dashboard's own tables (users, sessions, jobs) live in a scratch test
    database (Django's ``setup_databases``: in memory for SQLite), created here
    and dropped on exit; every request runs the whole middleware stack
    (session and user lookups included) with ``DEBUG`` off, as in production
    (``DEBUG`` logs every query; on SQLite each logged query costs a second
    statement that quotes its parameters). The live check of the audit page is
    cached like a server's (``DASHBOARD_LIVE_CHECK_MAX_AGE_S`` of an hour), so
    a timed request never waits for a broadcast.

    Args:
        rt: a :class:`dashboard.runtime.DashboardRuntime` (e.g. :func:`runtime_for`), installed for the block.

    Yields:
        the client; ``client.get(path)`` answers as the server would.
    """
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings
    from django.test.utils import setup_databases, teardown_databases

    from dashboard.runtime import install_runtime

    # Not setup_test_environment(): its instrumented template rendering would be timed too.
    names = setup_databases(verbosity=0, interactive=False, aliases={"default"})
    previous = install_runtime(rt)
    try:
        with override_settings(DASHBOARD_LIVE_CHECK_MAX_AGE_S=3600, ALLOWED_HOSTS=["testserver"], DEBUG=False):
            client = Client()
            client.force_login(get_user_model().objects.create_user("bench", is_staff=True))
            yield client
    finally:
        install_runtime(previous)
        teardown_databases(names, verbosity=0)


def served_ms(client: Any, path: str, repeats: int, **extra: Any) -> float:
    """Median milliseconds of ``client.get(path)`` (asserting 200) over ``repeats`` requests after one warm-up."""
    def call() -> None:
        response = client.get(path, **extra)
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
    return median_ms(call, repeats)


def throughput(worker: Callable[..., None], database: Any, thread_ids: list[str], workers: int,
               expected_status: str) -> float:
    """Threads per second rewritten by ``workers`` processes, started and imported before the clock starts.

    Args:
        worker: a module-level ``worker(postgres_url, thread_ids, barrier, out)`` (spawned, so picklable by
            name) that waits on ``barrier``, rewrites its threads and puts ``(time.time(), [status, ...])``
            on ``out``.
        database: the scratch Postgres database (``postgres_url``).
        thread_ids: the threads, dealt round-robin to the workers.
        workers: processes (count).
        expected_status: every thread's status must be this (e.g. ``"converted"``), else AssertionError.

    Returns:
        Threads per second (wall clock from the barrier to the last worker's finish).
    """
    spawn = multiprocessing.get_context("spawn")
    barrier, out = spawn.Barrier(workers + 1), spawn.Queue()
    shares = [thread_ids[i::workers] for i in range(workers)]
    procs = [spawn.Process(target=worker, args=(database.postgres_url, share, barrier, out)) for share in shares]
    for p in procs:
        p.start()
    barrier.wait()
    started = time.time()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    statuses = [s for _, batch in results for s in batch]
    assert statuses == [expected_status] * len(thread_ids), statuses
    return len(thread_ids) / (max(t for t, _ in results) - started)
