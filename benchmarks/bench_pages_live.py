"""Pages that used to wait for a Celery broadcast, with a live worker registered (``audit_page_ms_live``,
``job_page_ms_live``, ``metrics_ms``).

A scratch Postgres database of 1,000 seeded threads, a dashboard runtime on it, a live delta-mode worker
in the fleet registry (its heartbeat just now), the default ``DASHBOARD_LIVE_CHECK_MAX_AGE_S`` and an
empty cache, so the first request finds no live check and must not wait for one:

* ``audit_page_ms_live``: ``GET /audit/``;
* ``job_page_ms_live``: a queued job's page plus the ``/jobs/workers`` fragment it loads;
* ``metrics_ms``: ``GET /metrics`` with the metrics token.

Each is the median of the first request and the repeats after it (the first is also reported: ``_first``).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import Context, runtime_for, scratch_database, served
from deerflow.seed import SeedPlan, seed_threads

__all__ = ["run"]

_TOKEN = "bench-metrics-token"


def _worker_registered() -> None:
    from django.utils import timezone

    from dashboard.fleet.models import ProcessRecord

    now = timezone.now()
    ProcessRecord.objects.create(instance_id="bench-worker", role="worker", name="celery@bench", host="bench",
                                 pid=1, started_at=now, last_heartbeat=now, mode="delta", snapshot_frequency=10,
                                 queues=["dashboard", "checkpoints.delta"])


def _waiting_job() -> int:
    from dashboard.jobs.models import ConversionJob

    return ConversionJob.objects.create(kind=ConversionJob.Kind.DRY_RUN, state=ConversionJob.State.QUEUED,
                                        runner="celery").pk


def _ms(client: Any, paths: list[str], repeats: int, **extra: Any) -> tuple[float, float]:
    """``(first ms, median ms)`` of requesting every path in turn (asserting 200)."""
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        for path in paths:
            response = client.get(path, **extra)
            assert response.status_code == 200, (path, response.status_code, response.content[:300])
        times.append((time.perf_counter() - started) * 1000)
    return round(times[0], 1), round(sorted(times)[len(times) // 2], 1)


def run(ctx: Context) -> None:
    """Seed, register a live worker, time the three pages from a cold cache."""
    from django.core.cache import cache
    from django.test import override_settings

    repeats = 15 if ctx.full else 7
    with scratch_database(ctx, "pageslive") as database:
        seed_threads(database, SeedPlan(threads=1_000, turns_min=1, turns_max=6, mode="mixed",
                                        seed="bench-pages-live"), summarize=True)
        rt = runtime_for(database, "delta")
        with served(rt) as client, override_settings(DASHBOARD_LIVE_CHECK_MAX_AGE_S=10,
                                                     DASHBOARD_METRICS_TOKEN=_TOKEN):
            _worker_registered()
            job_id = _waiting_job()
            cache.clear()
            r = ctx.results
            r["audit_page_ms_live_first"], r["audit_page_ms_live"] = _ms(client, ["/audit/"], repeats)
            cache.clear()
            r["job_page_ms_live_first"], r["job_page_ms_live"] = _ms(
                client, [f"/jobs/{job_id}/", "/jobs/workers"], repeats)
            cache.clear()
            r["metrics_ms_first"], r["metrics_ms"] = _ms(client, ["/metrics"], repeats,
                                                          HTTP_AUTHORIZATION=f"Bearer {_TOKEN}")
    ctx.log(f"  with a live worker registered: audit {r['audit_page_ms_live']} ms, waiting job page + workers "
            f"{r['job_page_ms_live']} ms, /metrics {r['metrics_ms']} ms (first requests "
            f"{r['audit_page_ms_live_first']}, {r['job_page_ms_live_first']}, {r['metrics_ms_first']} ms)")
    ctx.notes.append("Pages with a live worker registered: the first request of each finds no live check cached "
                     "and must not wait for the broadcast (it runs in the background).")
