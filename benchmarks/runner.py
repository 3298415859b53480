"""Runs the benchmarks named in :data:`BENCHMARKS` and writes the report (``manage.py run_benchmarks``)."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import DEFAULT_ADMIN_URL, Context, machine
from benchmarks.report import write_report

__all__ = ["BENCHMARKS", "run_all"]

BENCHMARKS = ("list", "thread_page", "convert", "memory", "compact", "prune", "prune_peer", "pages_live", "jobs",
              "web")


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
