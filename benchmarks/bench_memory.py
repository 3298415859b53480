"""Peak memory of converting a 2,000-turn delta thread, against its largest single materialized state.

Each figure comes from a fresh subprocess (``python -m benchmarks.bench_memory
<job> <postgres url> <thread id>``) that imports everything, connects, builds
the graphs of both modes, records its resident set (``VmRSS``), resets the
kernel's high-water mark (``/proc/self/clear_refs``), does one job, and reports
the high-water mark (``VmHWM``; ``ru_maxrss`` where the reset is not allowed,
which may include an import-time peak); the figure is peak minus baseline (MB):

* ``state``: materialize the head through the accessor (the largest state of
  the thread: every message) -> ``convert_largest_state_mb_2000t``; the
  serialized size of that message list is ``convert_largest_state_serialized_mb_2000t``;
* ``convert``: :func:`deerflow.convert.convert_thread` with its defaults
  (integrity check on) -> ``convert_peak_rss_mb_2000t``, ``convert_memory_convert_s_2000t``;
* ``convert-write``: the same without the optional integrity check (the write
  path: read, materialize once, back up, rewrite, verify, commit), timed inside
  the child -> ``convert_2000t_s``, ``convert_2000t_peak_rss_mb``;
* ``compact`` / ``compact-integrity``: :func:`deerflow.convert.compactor.compact_thread`
  of a full thread without / with the integrity check (used by :mod:`benchmarks.bench_compact`).

The write floor of the conversion's output, ``convert_2000t_write_floor_s``, is
:func:`benchmarks.bench_convert.write_floor` of the converted thread (a binary
``COPY`` of its checkpoints and ``messages`` blobs under a new id, committed):
``convert_2000t_ratio_to_write_floor`` = ``convert_2000t_s`` / that floor
(the write path, as ``convert_ratio_to_write_floor`` for 1,000 checkpoints), and
``convert_2000t_integrity_ratio_to_write_floor`` the same for the defaults.
Between the two conversions the thread is restored from its backup
(:func:`deerflow.convert.revert_thread`, not timed).

The thread is plain question/answer turns (three checkpoints a turn) with
short texts, so its full-mode output (every checkpoint storing the whole
list) stays around a gigabyte and a half.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Context, scratch_database, timed
from deerflow.seed import SeedPlan, seed_threads

ROOT = Path(__file__).resolve().parents[1]


def _status_kb(field: str) -> int:
    return next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith(field + ":"))


def _reset_peak() -> bool:
    """Reset the kernel's resident-set high-water mark (``VmHWM``) to now; False where not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _child(job: str, url: str, thread_id: str) -> dict[str, Any]:
    from deerflow.config.database_config import DatabaseConfig
    from deerflow.convert import convert_thread
    from deerflow.convert.compactor import compact_thread
    from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
    from deerflow.storage.savers import open_checkpointer

    database = DatabaseConfig(backend="postgres", postgres_url=url)
    out: dict[str, Any] = {}
    with open_checkpointer(database, pool_size=1) as saver:
        # Warm up what both jobs build once (graphs of both modes, a read): not part of either figure.
        reader = CheckpointStateAccessor.for_saver(saver, mode="delta")
        for mode in ("delta", "full"):
            CheckpointStateAccessor.for_saver(saver, mode=mode).get({"configurable": {"thread_id": "warm-up",
                                                                                 "checkpoint_ns": ""}})
        baseline = _status_kb("VmRSS")
        exact = _reset_peak()  # else ru_maxrss, which may include an earlier, higher import-time peak
        if job == "state":
            messages = reader.get({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}).values["messages"]
            out["messages"] = len(messages)
            out["serialized_bytes"] = len(saver.serde.dumps_typed(messages)[1])
        else:
            started = time.perf_counter()
            if job.startswith("compact"):
                report = compact_thread(database, thread_id, snapshot_frequency=10,
                                        integrity=job == "compact-integrity")
            else:
                report = convert_thread(database, thread_id, integrity=job == "convert")
            out["seconds"] = time.perf_counter() - started
            out["status"], out["bytes_after"] = report.status, report.bytes_after
            out["bytes_before"], out["backup_id"] = report.bytes_before, report.backup_id
    out["baseline_kb"], out["ru_maxrss_kb"] = baseline, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["peak_kb"] = _status_kb("VmHWM") if exact else out["ru_maxrss_kb"]
    return out


#: A child whose resident set passes this is stopped (the machine is shared); the figure is then a lower bound.
RSS_CAP_KB = 8 * 1024 * 1024


def measure(job: str, url: str, thread_id: str) -> dict[str, Any]:
    """Run ``job`` in a fresh interpreter; returns its report (peak and baseline in KB).

    The parent watches the child's ``VmRSS`` and stops it above :data:`RSS_CAP_KB`;
    the report then says ``{"capped": True, "peak_kb": <cap>}``.
    """
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_memory", job, url, thread_id],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            rss = next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            rss = 0
        if rss > RSS_CAP_KB:
            proc.kill()
            proc.wait()
            return {"capped": True, "peak_kb": RSS_CAP_KB, "baseline_kb": 0, "status": "stopped at the cap",
                    "bytes_after": 0}
        time.sleep(0.5)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{job} child failed: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _mb(report: dict[str, Any]) -> float:
    return round((report["peak_kb"] - report["baseline_kb"]) / 1024, 1)


def run(ctx: Context) -> None:
    """Seed one long plain delta thread, then measure the subprocesses and the write floor."""
    from benchmarks.bench_convert import write_floor
    from deerflow.convert import revert_thread

    turns = 2000 if ctx.full else 200
    with scratch_database(ctx, "memory") as database:
        seconds, report = timed(lambda: seed_threads(database, SeedPlan(
            threads=1, turns_min=turns, turns_max=turns, mode="delta", snapshot_frequency=10, seed="bench-memory",
            templates=1, fork_rate=0, text_scale=0.1, long_output_rate=0, max_tool_rounds=0)))
        thread_id = report.samples[0].thread_id
        ctx.log(f"  seeded a {turns}-turn thread ({report.checkpoints} checkpoints) in {seconds:.0f} s")
        state = measure("state", database.postgres_url, thread_id)
        write = measure("convert-write", database.postgres_url, thread_id)
        assert write["status"] in ("converted", "stopped at the cap"), write
        floors = [] if write.get("capped") else [write_floor(database, thread_id) for _ in range(1 if ctx.full else 3)]
        if write.get("backup_id"):
            reverted = revert_thread(database, write["backup_id"])
            assert reverted.status == "reverted", reverted.as_dict()
        seconds, convert = timed(lambda: measure("convert", database.postgres_url, thread_id))
    assert convert["status"] in ("converted", "stopped at the cap"), convert
    if convert.get("capped"):
        ctx.notes.append(f"The conversion child passed the {RSS_CAP_KB // 1024 // 1024} GB resident-set cap and "
                         "was stopped: convert_peak_rss_mb is a lower bound.")
    tag = "2000t" if ctx.full else f"{turns}t"
    r = ctx.results
    r[f"convert_largest_state_mb_{tag}"] = _mb(state)
    r[f"convert_largest_state_serialized_mb_{tag}"] = round(state["serialized_bytes"] / 1e6, 2)
    r[f"convert_peak_rss_mb_{tag}"] = _mb(convert)
    r[f"convert_peak_over_largest_state_{tag}"] = round(
        r[f"convert_peak_rss_mb_{tag}"] / max(r[f"convert_largest_state_mb_{tag}"], 0.1), 1)
    r[f"convert_memory_thread_checkpoints_{tag}"] = report.checkpoints
    r[f"convert_memory_thread_messages_{tag}"] = state["messages"]
    r[f"convert_peak_rss_capped_{tag}"] = bool(convert.get("capped"))
    r[f"convert_memory_output_mb_{tag}"] = None if convert.get("capped") else round(convert["bytes_after"] / 1e6, 1)
    r[f"convert_memory_convert_s_{tag}"] = round(seconds, 1)
    if floors:
        floor = statistics.median(floors)
        r[f"convert_{tag}_s"] = round(write["seconds"], 1)
        r[f"convert_{tag}_peak_rss_mb"] = _mb(write)
        r[f"convert_{tag}_write_floor_s"] = round(floor, 1)
        r[f"convert_{tag}_ratio_to_write_floor"] = round(write["seconds"] / floor, 2)
        if not convert.get("capped"):
            r[f"convert_{tag}_integrity_s"] = round(convert["seconds"], 1)
            r[f"convert_{tag}_integrity_ratio_to_write_floor"] = round(convert["seconds"] / floor, 2)
        ctx.log(f"  write path {write['seconds']:.1f} s (peak {_mb(write)} MB) vs write floor {floor:.1f} s: "
                f"x{r[f'convert_{tag}_ratio_to_write_floor']}; with the integrity check {convert['seconds']:.1f} s")
    ctx.log(f"  largest state {r[f'convert_largest_state_mb_{tag}']} MB; conversion peak "
            f"{'>= ' if convert.get('capped') else ''}{r[f'convert_peak_rss_mb_{tag}']} MB "
            f"(x{r[f'convert_peak_over_largest_state_{tag}']}), {seconds:.0f} s, "
            f"output {r[f'convert_memory_output_mb_{tag}']} MB")
    if not ctx.full:
        ctx.notes.append(f"Peak memory measured on a {turns}-turn thread (small scale), keys end in _{tag}.")


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], sys.argv[2], sys.argv[3])))
