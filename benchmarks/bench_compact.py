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
  (checkpoints, blobs, writes) / before; ``compact_2000t_s`` its compaction time;
* peak memory of that compaction, in a fresh subprocess as
  :mod:`benchmarks.bench_memory` measures the conversion's (peak resident set
  minus the baseline after imports and warm-up): ``compact_peak_rss_mb_2000t``,
  against the thread's largest single materialized state
  ``compact_largest_state_mb_2000t`` (the head read through the accessor):
  ``compact_peak_over_largest_state_2000t``;
* ``compact_2000t_write_floor_s``: :func:`benchmarks.bench_convert.write_floor`
  of that compacted thread (its output rows copied under a new id);
  ``compact_2000t_ratio_to_write_floor`` = ``compact_2000t_s`` (the write path,
  integrity check off, as ``convert_2000t_ratio_to_write_floor``) / that floor
  and ``compact_2000t_integrity_ratio_to_write_floor`` the same with the check
  on (the jobs' default; the thread is reverted from its backup between the two,
  not timed) (issue 16 item 2: within 2x);
* ``compact_2000t_read_floor_s``: :func:`benchmarks.bench_convert.read_floor`
  of the full thread before compaction (its input rows read, binary), and
  ``compact_2000t_ratio_to_io_floor`` / ``..._integrity_ratio_to_io_floor``:
  the two times over reading the input plus writing the output (the input is
  about ten times the output, so writing the output alone is not a floor a
  compaction can approach);
* ``compact_threads_per_s_1_worker`` / ``_2_workers``: whole compactions of
  copies of the 1,000-checkpoint thread (integrity check on, the jobs' default)
  by one process and by two in parallel, each process calling
  :func:`~deerflow.convert.compactor.compact_thread` (the function the
  dashboard's Celery thread task calls), started and imported before the clock starts.

All figures on scratch Postgres databases; medians where repeated.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks.bench_convert import read_floor, write_floor
from benchmarks.bench_memory import measure
from benchmarks.common import Context, scratch_database, throughput, timed
from deerflow.convert import revert_thread
from deerflow.convert.compactor import compact_thread
from deerflow.seed import SeedPlan, seed_threads

K = 10


def _seed(database, *, threads: int, turns: int, seed: str, tools: bool) -> list[str]:
    plan = SeedPlan(threads=threads, turns_min=turns, turns_max=turns, mode="full", snapshot_frequency=K, seed=seed,
                    templates=1, fork_rate=0, text_scale=0.1, long_output_rate=0,
                    **({} if tools else {"max_tool_rounds": 0}))
    return [s.thread_id for s in seed_threads(database, plan).samples]


def _worker(url: str, thread_ids: list[str], barrier: Any, out: Any) -> None:
    from deerflow.config.database_config import DatabaseConfig

    database = DatabaseConfig(backend="postgres", postgres_url=url)
    barrier.wait()
    statuses = [compact_thread(database, tid, snapshot_frequency=K).status for tid in thread_ids]
    out.put((time.time(), statuses))


def run(ctx: Context) -> None:
    """Seed full threads, compact them, and measure."""
    run_ratio(ctx)
    run_long(ctx)


def run_ratio(ctx: Context) -> None:
    """``compact_s``, ``compact_write_floor_s`` and ``compact_ratio_to_write_floor`` (medians)."""
    r = ctx.results
    turns, repeats, per_throughput = (208, 3, 2) if ctx.full else (60, 1, 1)
    with scratch_database(ctx, "compact") as database:
        ids = _seed(database, threads=repeats + 3 * per_throughput, turns=turns, seed="bench-compact", tools=True)
        rest, ids = ids[repeats:], ids[:repeats]
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
        one, two = rest[:per_throughput], rest[per_throughput:]
        r["compact_threads_per_s_1_worker"] = round(throughput(_worker, database, one, 1, "compacted"), 4)
        r["compact_threads_per_s_2_workers"] = round(throughput(_worker, database, two, 2, "compacted"), 4)
        ctx.log(f"  throughput: 1 worker {r['compact_threads_per_s_1_worker']} threads/s, "
                f"2 workers {r['compact_threads_per_s_2_workers']} threads/s")


def run_long(ctx: Context) -> None:
    """``compact_bytes_after_over_before_2000t`` (``_200t`` at small scale), its time, sizes and write floor."""
    r = ctx.results
    long_turns = 2000 if ctx.full else 200
    tag = "2000t" if ctx.full else f"{long_turns}t"
    with scratch_database(ctx, "compact-long") as database:
        (thread_id,) = _seed(database, threads=1, turns=long_turns, seed="bench-compact-long", tools=False)
        state = measure("state", database.postgres_url, thread_id)
        read = statistics.median(read_floor(database, thread_id) for _ in range(1 if ctx.full else 3))
        job = measure("compact", database.postgres_url, thread_id)
        assert job["status"] in ("compacted", "stopped at the cap"), job
        if not job.get("capped"):
            floor = statistics.median(write_floor(database, thread_id) for _ in range(1 if ctx.full else 3))
            reverted = revert_thread(database, job["backup_id"])
            assert reverted.status == "reverted", reverted.as_dict()
            checked = measure("compact-integrity", database.postgres_url, thread_id)
            assert checked["status"] == "compacted", checked
    r[f"compact_largest_state_mb_{tag}"] = round((state["peak_kb"] - state["baseline_kb"]) / 1024, 1)
    r[f"compact_peak_rss_mb_{tag}"] = round((job["peak_kb"] - job["baseline_kb"]) / 1024, 1)
    r[f"compact_peak_over_largest_state_{tag}"] = round(
        r[f"compact_peak_rss_mb_{tag}"] / max(r[f"compact_largest_state_mb_{tag}"], 0.1), 1)
    r[f"compact_peak_rss_capped_{tag}"] = bool(job.get("capped"))
    if job.get("capped"):
        ctx.notes.append(f"The {long_turns}-turn compaction child passed the resident-set cap and was stopped: "
                         f"compact_peak_rss_mb_{tag} is a lower bound and its bytes were not measured.")
        return
    r[f"compact_bytes_after_over_before_{tag}"] = round(job["bytes_after"] / job["bytes_before"], 4)
    r[f"compact_{tag}_s"] = round(job["seconds"], 1)
    r[f"compact_{tag}_mb_before"] = round(job["bytes_before"] / 1e6, 1)
    r[f"compact_{tag}_mb_after"] = round(job["bytes_after"] / 1e6, 2)
    r[f"compact_{tag}_write_floor_s"] = round(floor, 2)
    r[f"compact_{tag}_ratio_to_write_floor"] = round(job["seconds"] / floor, 2)
    r[f"compact_{tag}_integrity_s"] = round(checked["seconds"], 1)
    r[f"compact_{tag}_integrity_ratio_to_write_floor"] = round(checked["seconds"] / floor, 2)
    r[f"compact_{tag}_read_floor_s"] = round(read, 2)
    r[f"compact_{tag}_ratio_to_io_floor"] = round(job["seconds"] / (read + floor), 2)
    r[f"compact_{tag}_integrity_ratio_to_io_floor"] = round(checked["seconds"] / (read + floor), 2)
    ctx.log(f"  {long_turns}-turn full thread: {job['bytes_before'] / 1e6:.1f} MB -> {job['bytes_after'] / 1e6:.2f} MB "
            f"(x{r[f'compact_bytes_after_over_before_{tag}']}) in {job['seconds']:.0f} s; peak "
            f"{r[f'compact_peak_rss_mb_{tag}']} MB (x{r[f'compact_peak_over_largest_state_{tag}']} the largest "
            f"state, {r[f'compact_largest_state_mb_{tag}']} MB)")
    ratio, checked_ratio = r[f"compact_{tag}_ratio_to_write_floor"], r[f"compact_{tag}_integrity_ratio_to_write_floor"]
    ctx.log(f"  write floor of its output {floor:.2f} s: write path x{ratio}, "
            f"with the integrity check {checked['seconds']:.1f} s x{checked_ratio}; reading its input {read:.2f} s, "
            f"against reading the input plus writing the output x{r[f'compact_{tag}_ratio_to_io_floor']}")
    if not ctx.full:
        ctx.notes.append(f"Compaction bytes after/before and peak memory measured on a {long_turns}-turn thread "
                         f"(small scale), keys ending in _{tag}.")
