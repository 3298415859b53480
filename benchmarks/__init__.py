"""Benchmarks for issue 6 (scale and speed), one module per benchmark, run by ``manage.py run_benchmarks``.

Modules (run in this order; each adds flat keys to one results dict):

* :mod:`benchmarks.bench_list` -- thread list and census at 1k/10k/100k threads vs the naive aggregate;
* :mod:`benchmarks.bench_thread_page` -- thread page materialization vs LangGraph's ``get_state``;
* :mod:`benchmarks.bench_convert` -- conversion of 1,000-checkpoint threads: one-pass vs naive
  per-checkpoint ``get_state``, vs the write floor, and throughput with 1 and 2 workers;
* :mod:`benchmarks.bench_memory` -- peak memory of converting a 2,000-turn thread (subprocesses);
* :mod:`benchmarks.bench_prune` -- retention: keep-last 10 throughput over a 100k-thread database, and one
  1,000-checkpoint delta thread vs a plain DELETE of the same rows.
* :mod:`benchmarks.bench_compact` -- full -> delta compaction: vs the write floor, bytes after / before.
* :mod:`benchmarks.bench_web` -- requests/s and p99 of 20 loopback clients, gunicorn gthread vs two sync workers.

:func:`run_all` writes ``benchmarks/results/latest.json`` and ``latest.md``
(a small-scale or subset run: ``latest-<scale>[-<names>].*``; :mod:`benchmarks.report`). Scratch Postgres
databases are created and dropped by each benchmark. Benchmarks are not tests: nothing here asserts a time.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import DEFAULT_ADMIN_URL, Context, machine
from benchmarks.report import write_report

__all__ = ["BENCHMARKS", "run_all"]

BENCHMARKS = ("list", "thread_page", "convert", "memory", "compact", "prune", "web")


def run_all(*, scale: str = "full", only: tuple[str, ...] = (), admin_url: str = DEFAULT_ADMIN_URL,
            log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the benchmarks (``only`` a subset of :data:`BENCHMARKS`) and write the report.

    Args:
        scale: ``"full"`` (the issue's sizes) or ``"small"`` (1k threads, short threads; minutes).
        only: names from :data:`BENCHMARKS`; empty runs all.
        admin_url: a Postgres URL allowed to create and drop databases.
        log: progress output.

    Returns:
        ``{"scale", "machine", "results", "notes", "seconds", "paths"}``.

    Raises:
        ValueError: an unknown scale or benchmark name.
    """
    if scale not in ("full", "small"):
        raise ValueError(f"scale must be 'full' or 'small'; got {scale!r}")
    unknown = set(only) - set(BENCHMARKS)
    if unknown:
        raise ValueError(f"unknown benchmark(s) {sorted(unknown)}; choose from {', '.join(BENCHMARKS)}")
    ctx = Context(scale=scale, admin_url=admin_url, log=log)
    started = time.monotonic()
    about = machine(ctx)
    if scale == "small":
        ctx.notes.append("Small scale: 1k threads for the list and census (no 10k/100k keys), fewer and shorter "
                         "threads for conversion, a 200-turn thread for peak memory. Run `make bench` for the "
                         "issue's sizes.")
    for name in only or BENCHMARKS:
        log(f"== {name}")
        importlib.import_module(f"benchmarks.bench_{name}").run(ctx)
    run = {"scale": scale, "machine": about, "results": ctx.results, "notes": ctx.notes,
           "seconds": round(time.monotonic() - started, 1), "only": list(only)}
    run["paths"] = [str(p) for p in write_report(run)]
    return run
