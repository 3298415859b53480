"""Retention side by side with LangGraph's own prune, against its floor, and by two workers.

* ``prune_full_ratio_vs_langgraph``: :func:`deerflow.retention.prune_threads`
  keep-last 1 without backup of full-mode threads (30 threads of 120 turns at
  full scale, 10 of 40 at small) over LangGraph's
  ``PostgresSaver.prune(thread_ids, strategy="keep_latest")``, each on its own
  byte-identical copy of one seeded database; the medians of :data:`REPEATS`
  runs of each, interleaved;
* ``prune_full_backup_ratio_vs_langgraph``: the same prune with backup and
  verification (the default) over the same LangGraph time;
* ``prune_delta_ratio_to_floor``: keep-last 10 of delta threads (backup off)
  over the floor on an identical copy: deleting exactly the rows the prune
  deleted plus writing the rebased snapshots it wrote (the same bytes),
  committed; medians of :data:`REPEATS` runs of each, each pair on fresh copies;
* ``prune_threads_per_s_100k_2_workers`` (``_1k_`` at small scale): keep-last
  10 with backups of an evenly spaced sample of a seeded mixed-mode database
  by two processes, each calling ``prune_threads`` on its half.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from benchmarks.common import Context, copy_database, scratch_database, timed
from deerflow.retention import prune_threads
from deerflow.seed import SeedPlan, seed_threads

__all__ = ["run"]

#: Runs of each side of a comparison (each on a fresh copy of the seeded database); the keys are their medians.
REPEATS = 3


def _thread_ids(database: Any) -> list[str]:
    with psycopg.connect(database.postgres_url) as conn:
        return [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")]


def _langgraph_prune(database: Any, ids: list[str]) -> float:
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.connect(database.postgres_url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        return timed(lambda: saver.prune(ids, strategy="keep_latest"))[0]


def _ours(database: Any, ids: list[str], *, n: int, backup: bool) -> tuple[float, list[Any]]:
    seconds, reports = timed(lambda: prune_threads(database, ids, "keep_last", n=n, backup=backup))
    bad = [r.as_dict() for r in reports if r.status != "pruned"]
    assert not bad, bad[:1]
    return seconds, reports


def _full(ctx: Context) -> None:
    r = ctx.results
    threads, turns = (30, 120) if ctx.full else (10, 40)
    with scratch_database(ctx, "prunepeer") as database:
        report = seed_threads(database, SeedPlan(threads=threads, turns_min=turns, turns_max=turns, mode="full",
                                                 seed="bench-prune-peer", templates=1, fork_rate=0, text_scale=0.1,
                                                 long_output_rate=0, max_tool_rounds=0), summarize=False)
        ids = _thread_ids(database)
        runs: dict[str, list[float]] = {"langgraph": [], "plain": [], "backup": []}
        for _ in range(REPEATS):  # each side on a fresh copy, interleaved, so the machine's drift hits all three
            with copy_database(ctx, database, "lg") as theirs:
                runs["langgraph"].append(_langgraph_prune(theirs, ids))
            with copy_database(ctx, database, "ours") as ours:
                runs["plain"].append(_ours(ours, ids, n=1, backup=False)[0])
            with copy_database(ctx, database, "oursb") as ours:
                runs["backup"].append(_ours(ours, ids, n=1, backup=True)[0])
        langgraph_s, plain_s, backup_s = (statistics.median(runs[k]) for k in ("langgraph", "plain", "backup"))
    r["prune_full_checkpoints"] = report.checkpoints
    r["prune_full_langgraph_s"] = round(langgraph_s, 3)
    r["prune_full_s"] = round(plain_s, 3)
    r["prune_full_backup_s"] = round(backup_s, 3)
    r["prune_full_ratio_vs_langgraph"] = round(plain_s / langgraph_s, 2)
    r["prune_full_backup_ratio_vs_langgraph"] = round(backup_s / langgraph_s, 2)
    ctx.log(f"  {threads} full threads of {turns} turns ({report.checkpoints} checkpoints): LangGraph prune "
            f"{langgraph_s:.2f} s, ours {plain_s:.2f} s (with backup {backup_s:.2f} s)")


def _floor(database: Any, pruned: Any, ids: list[str], rebased: set[str]) -> float:
    """Delete on ``database`` (a copy of ``pruned`` before the prune) the rows the prune deleted, and write
    the rebased snapshots' bytes; seconds, committed."""
    with psycopg.connect(pruned.postgres_url) as conn:
        kept = conn.execute("SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id IS NULL "
                            "FROM checkpoints WHERE thread_id = ANY(%s)", (ids,)).fetchall()
        blobs = conn.execute("SELECT thread_id, checkpoint_ns, channel, version FROM checkpoint_blobs "
                             "WHERE thread_id = ANY(%s)", (ids,)).fetchall()
        snapshots = conn.execute(
            "SELECT b.thread_id, b.checkpoint_ns, b.version, b.type, b.blob FROM checkpoints c "
            "JOIN checkpoint_blobs b ON c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
            "AND b.channel = 'messages' AND c.checkpoint -> 'channel_versions' ->> 'messages' = b.version "
            "WHERE c.thread_id = ANY(%s) AND c.checkpoint_id = ANY(%s)", (ids, sorted(rebased))).fetchall()
    kept_by = [[k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept]]
    blobs_by = [[b[0] for b in blobs], [b[1] for b in blobs], [b[2] for b in blobs], [b[3] for b in blobs]]
    starts = [k for k in kept if k[3]]
    with psycopg.connect(database.postgres_url) as conn:
        started = time.perf_counter()
        for table in ("checkpoint_writes", "checkpoints"):
            conn.execute(f"DELETE FROM {table} WHERE thread_id = ANY(%s) "
                         "AND (thread_id, checkpoint_ns, checkpoint_id) NOT IN "
                         "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))",
                         (ids, *kept_by))
        conn.execute("DELETE FROM checkpoint_blobs WHERE thread_id = ANY(%s) "
                     "AND (thread_id, checkpoint_ns, channel, version) NOT IN "
                     "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]))",
                     (ids, *blobs_by))
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
                            "VALUES (%s, %s, 'messages', %s || '~floor', %s, %s)", snapshots)
            cur.executemany("UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = %s "
                            "AND checkpoint_ns = %s AND checkpoint_id = %s", [s[:3] for s in starts])
        conn.commit()
        return time.perf_counter() - started


def _delta(ctx: Context) -> None:
    r = ctx.results
    threads, turns = (10, 208) if ctx.full else (4, 104)
    with scratch_database(ctx, "prunedelta") as database:
        seed_threads(database, SeedPlan(threads=threads, turns_min=turns, turns_max=turns, mode="delta",
                                        snapshot_frequency=10, seed="bench-prune-delta", templates=1, fork_rate=0,
                                        text_scale=0.1, long_output_rate=0), summarize=False)
        ids = _thread_ids(database)
        ours_runs, floor_runs = [], []
        for _ in range(REPEATS):
            with copy_database(ctx, database, "floor") as floor_db, copy_database(ctx, database, "ours") as ours:
                ours_s, reports = _ours(ours, ids, n=10, backup=False)
                ours_runs.append(ours_s)
                rebased = {c for rep in reports for c in rep.rebased_checkpoint_ids}
                floor_runs.append(_floor(floor_db, ours, ids, rebased))
        ours_s, floor_s = statistics.median(ours_runs), statistics.median(floor_runs)
    r["prune_delta_s"] = round(ours_s, 3)
    r["prune_delta_floor_s"] = round(floor_s, 3)
    r["prune_delta_ratio_to_floor"] = round(ours_s / floor_s, 2)
    ctx.log(f"  keep_last 10 of {threads} delta threads of {turns} turns: {ours_s:.2f} s, floor {floor_s:.2f} s")


def _worker(url: str, ids: list[str], out: Any) -> None:
    from deerflow.config.database_config import DatabaseConfig

    reports = prune_threads(DatabaseConfig(backend="postgres", postgres_url=url), ids, "keep_last", n=10)
    out.put(sorted({rep.status for rep in reports}))


def _two_workers(ctx: Context) -> None:
    threads = 100_000 if ctx.full else 1_000
    sample = 600 if ctx.full else 200
    with scratch_database(ctx, "prunew2") as database:
        seed_threads(database, SeedPlan(threads=threads, turns_min=1, turns_max=10, mode="mixed",
                                        snapshot_frequency=10, seed="bench-prune-many"), summarize=False)
        with psycopg.connect(database.postgres_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        chosen = _thread_ids(database)[::max(threads // sample, 1)][:sample]
        mp = multiprocessing.get_context("fork")
        out = mp.Queue()
        procs = [mp.Process(target=_worker, args=(database.postgres_url, chosen[i::2], out)) for i in range(2)]
        started = time.perf_counter()
        for p in procs:
            p.start()
        statuses = [out.get() for _ in procs]
        for p in procs:
            p.join()
        seconds = time.perf_counter() - started
    assert all(set(s) <= {"pruned", "nothing_to_prune"} for s in statuses), statuses
    key = "prune_threads_per_s_100k_2_workers" if ctx.full else "prune_threads_per_s_1k_2_workers"
    ctx.results[key] = round(len(chosen) / seconds, 1)
    ctx.log(f"  keep_last 10 with backups, 2 workers, {len(chosen)} of {threads} threads: "
            f"{len(chosen) / seconds:.1f} threads/s")


def run(ctx: Context) -> None:
    """LangGraph side by side, the delta floor, two workers."""
    _full(ctx)
    _delta(ctx)
    _two_workers(ctx)
    ctx.notes.append("Retention vs LangGraph: `prune_full_ratio_vs_langgraph` is `prune_threads` keep-last 1 "
                     "without backup over LangGraph's `prune(keep_latest)` of the same full-mode threads, each on "
                     "its own copy of one database; `..._backup_...` the same with backup and verification; "
                     "`prune_delta_ratio_to_floor` keep-last 10 of delta threads over deleting the same rows "
                     "and writing the same rebased snapshot bytes.")
