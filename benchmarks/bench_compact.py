"""Compaction (full -> delta) of legacy full-mode threads: time against the write floor, and bytes after / before.

* ``compact_s``: :func:`deerflow.convert.compactor.compact_thread` of one full
  thread of about 1,000 checkpoints (300 at small scale) at cadence 10, as
  the jobs run it: the pre-write integrity check on, and the verification
  through LangGraph's delta reader before commit (one walk by LangGraph's read
  rule plus real reads at heads, seams and a few more);
* ``compact_write_floor_s``: a binary ``COPY`` of the compacted thread's output
  rows (checkpoints and ``messages`` blobs) under a new thread id, committed:
  merely writing the rows the compaction wrote
  (:func:`benchmarks.bench_convert.write_floor`);
* ``compact_ratio_to_write_floor`` = ``compact_s`` / ``compact_write_floor_s`` (issue 11: <= 2);
* ``compact_bytes_after_over_before_2000t``: a 2,000-turn plain full thread
  (200 turns at small scale, key ``..._200t``): stored bytes after compaction
  (checkpoints, blobs, writes) / before; ``compact_2000t_s`` its compaction time.

All figures on one scratch Postgres database; medians where repeated.
"""

from __future__ import annotations

import statistics

from benchmarks.bench_convert import write_floor
from benchmarks.common import Context, scratch_database, timed
from deerflow.convert.compactor import compact_thread
from deerflow.seed import SeedPlan, seed_threads

K = 10


def _seed(database, *, threads: int, turns: int, seed: str, tools: bool) -> list[str]:
    plan = SeedPlan(threads=threads, turns_min=turns, turns_max=turns, mode="full", snapshot_frequency=K, seed=seed,
                    templates=1, fork_rate=0, text_scale=0.1, long_output_rate=0,
                    **({} if tools else {"max_tool_rounds": 0}))
    return [s.thread_id for s in seed_threads(database, plan).samples]


def run(ctx: Context) -> None:
    """Seed full threads, compact them, and measure."""
    run_ratio(ctx)
    run_long(ctx)


def run_ratio(ctx: Context) -> None:
    """``compact_s``, ``compact_write_floor_s`` and ``compact_ratio_to_write_floor`` (medians)."""
    r = ctx.results
    turns, repeats = (208, 3) if ctx.full else (60, 1)
    with scratch_database(ctx, "compact") as database:
        ids = _seed(database, threads=repeats, turns=turns, seed="bench-compact", tools=True)
        times, floors = [], []
        for thread_id in ids:
            seconds, report = timed(lambda tid=thread_id: compact_thread(database, tid, snapshot_frequency=K))
            assert report.status == "compacted", report.as_dict()
            times.append(seconds)
            floors.append(write_floor(database, thread_id))
            ctx.log(f"  compact {report.checkpoints_total} checkpoints: {seconds:.2f} s, floor {floors[-1]:.3f} s "
                    f"({report.bytes_before / 1e6:.1f} MB -> {report.bytes_after / 1e6:.2f} MB)")
        r["compact_checkpoints_per_thread"] = report.checkpoints_total
        r["compact_s"] = round(statistics.median(times), 2)
        r["compact_write_floor_s"] = round(statistics.median(floors), 3)
        r["compact_ratio_to_write_floor"] = round(r["compact_s"] / r["compact_write_floor_s"], 2)


def run_long(ctx: Context) -> None:
    """``compact_bytes_after_over_before_2000t`` (``_200t`` at small scale) and its time and sizes."""
    r = ctx.results
    long_turns = 2000 if ctx.full else 200
    tag = "2000t" if ctx.full else f"{long_turns}t"
    with scratch_database(ctx, "compact-long") as database:
        (thread_id,) = _seed(database, threads=1, turns=long_turns, seed="bench-compact-long", tools=False)
        seconds, report = timed(lambda: compact_thread(database, thread_id, snapshot_frequency=K, integrity=False))
        assert report.status == "compacted", report.as_dict()
    r[f"compact_bytes_after_over_before_{tag}"] = round(report.bytes_after / report.bytes_before, 4)
    r[f"compact_{tag}_s"] = round(seconds, 1)
    r[f"compact_{tag}_mb_before"] = round(report.bytes_before / 1e6, 1)
    r[f"compact_{tag}_mb_after"] = round(report.bytes_after / 1e6, 2)
    ctx.log(f"  {long_turns}-turn full thread: {report.bytes_before / 1e6:.1f} MB -> {report.bytes_after / 1e6:.2f} MB "
            f"(x{r[f'compact_bytes_after_over_before_{tag}']}) in {seconds:.0f} s")
    if not ctx.full:
        ctx.notes.append(f"Compaction bytes after/before measured on a {long_turns}-turn thread (small scale), "
                         f"key compact_bytes_after_over_before_{tag}.")
