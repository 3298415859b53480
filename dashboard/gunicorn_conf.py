"""gunicorn settings for the web service, sized to the machine (``gunicorn -c python:dashboard.gunicorn_conf``).

``gthread`` workers: each worker process serves ``threads`` requests at
once, so a request waiting on the checkpoint database does not hold the
whole process (two sync workers served about 13 requests/s). Django, the
psycopg pools and the runtime are thread-safe; each worker process freezes
its own runtime at import, as a sync worker does.

* ``workers``: ``DASHBOARD_WEB_WORKERS``, else one per CPU core plus one
  (Python runs one thread at a time per process; more processes use more cores).
* ``threads``: ``DASHBOARD_WEB_THREADS``, else 2 per worker. The pages are CPU-bound (rendering), and
  threads of one process share one interpreter lock: on 2 cores, 3 x 2 served 142 requests/s with p99
  276 ms where 3 x 8 served 128 with p99 658 ms (``benchmarks/bench_web.py``). Two threads still let a
  request that waits on the checkpoint database yield to another; raise it when that database is far away.
* ``timeout``: 60 s; ``keepalive``: 5 s (clients reuse connections).

``--bind`` stays on the command line. Read by gunicorn only, never by Django.
"""

from __future__ import annotations

import os


def _positive(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"{name}={raw!r} must be a whole number >= 1.")
    return int(raw)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


worker_class = "gthread"
workers = _positive("DASHBOARD_WEB_WORKERS", _cores() + 1)
threads = _positive("DASHBOARD_WEB_THREADS", 2)
timeout = 60
keepalive = 5
accesslog = "-"
