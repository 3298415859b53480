"""Retention: keep-last 10 throughput over a 100k-thread database, and one 1,000-checkpoint delta thread vs DELETE.

* ``prune_threads_per_s_100k``: :func:`deerflow.retention.keep_last` (n=10,
  backup on, the default) thread after thread by one process, over a sample
  of the threads of a seeded 100,000-thread mixed-mode database (full scale;
  1,000 threads at small scale); ``prune_threads_sampled`` says how many;
* ``prune_1000_s`` / ``prune_1000_with_backup_s``: ``keep_last(10)`` of one
  ~1,000-checkpoint delta thread without / with the backup (plan, rebase,
  delete, verification through our walk and LangGraph's reader, commit);
* ``prune_delete_floor_s``: a plain ``DELETE`` of exactly the rows that prune
  deleted (its checkpoints, their writes rows and the garbage blobs) from an
  identical copy of the thread, committed: merely deleting them;
* ``prune_ratio_to_delete_floor`` = ``prune_1000_s`` / ``prune_delete_floor_s``.
"""

from __future__ import annotations

import statistics
import time

import psycopg

from benchmarks.common import Context, scratch_database, timed
from deerflow.retention import keep_last
from deerflow.seed import SeedPlan, seed_threads

__all__ = ["delete_floor", "run"]


def delete_floor(database, thread_id: str, deleted: list[str], kept: list[str]) -> float:
    """Seconds to DELETE the given checkpoints of ``thread_id``, their writes, and blobs only they use; committed."""
    with psycopg.connect(database.postgres_url) as conn:
        start = time.perf_counter()
        conn.execute("DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_id = ANY(%s)",
                     (thread_id, deleted))
        conn.execute(
            "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND NOT EXISTS (SELECT 1 FROM checkpoints c "
            "WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint_id = ANY(%s) "
            "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)", (thread_id, kept))
        conn.execute("DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_id = ANY(%s)", (thread_id, deleted))
        conn.commit()
        return time.perf_counter() - start


def _long_threads(ctx: Context, database, n: int) -> list[str]:
    report = seed_threads(database, SeedPlan(threads=n, turns_min=208, turns_max=208, mode="delta",
                                             snapshot_frequency=10, seed="bench-prune", templates=1, fork_rate=0,
                                             text_scale=0.1, long_output_rate=0), summarize=False)
    ctx.results["prune_checkpoints_per_thread"] = report.checkpoints // n
    return [s.thread_id for s in report.samples]


def run(ctx: Context) -> None:
    """Seed, prune, and compare with the delete floor."""
    r = ctx.results
    repeats = 3 if ctx.full else 1
    with scratch_database(ctx, "prune1k") as database:
        ids = _long_threads(ctx, database, 3 * repeats)
        plain, backed, floors = [], [], []
        for i in range(repeats):
            seconds, report = timed(lambda tid=ids[i]: keep_last(database, tid, 10, backup=False))
            assert report.status == "pruned", report.as_dict()
            plain.append(seconds)
            backed.append(timed(lambda tid=ids[repeats + i]: keep_last(database, tid, 10))[0])
            # the same rows (same template, same shape) of a third identical thread, by plain DELETE
            other = ids[2 * repeats + i]
            with psycopg.connect(database.postgres_url) as conn:
                rows = conn.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s ORDER BY checkpoint_id",
                                    (other,)).fetchall()
            all_ids = [row[0] for row in rows]
            floors.append(delete_floor(database, other, all_ids[:-10], all_ids[-10:]))
            ctx.log(f"  keep_last 10: {seconds:.2f} s (backup {backed[-1]:.2f} s), DELETE floor {floors[-1]:.3f} s, "
                    f"{report.bytes_before / 1e6:.1f} MB -> {report.bytes_after / 1e6:.2f} MB, "
                    f"{len(report.deleted_checkpoint_ids)} deleted")
        r["prune_1000_s"] = round(statistics.median(plain), 3)
        r["prune_1000_with_backup_s"] = round(statistics.median(backed), 3)
        r["prune_delete_floor_s"] = round(statistics.median(floors), 4)
        r["prune_ratio_to_delete_floor"] = round(r["prune_1000_s"] / r["prune_delete_floor_s"], 1)
    threads = 100_000 if ctx.full else 1_000
    sample = 300 if ctx.full else 100
    with scratch_database(ctx, "prune100k") as database:
        seed_threads(database, SeedPlan(threads=threads, turns_min=1, turns_max=10, mode="mixed",
                                        snapshot_frequency=10, seed="bench-prune-many"), summarize=False)
        with psycopg.connect(database.postgres_url) as conn:
            conn.execute("ANALYZE")
            step = max(threads // sample, 1)
            rows = conn.execute("SELECT thread_id FROM (SELECT DISTINCT thread_id FROM checkpoints) t "
                                "ORDER BY thread_id").fetchall()
        chosen = [row[0] for row in rows][::step][:sample]
        started = time.perf_counter()
        statuses = [keep_last(database, tid, 10).status for tid in chosen]
        seconds = time.perf_counter() - started
        assert set(statuses) <= {"pruned", "nothing_to_prune"}, statuses
        r["prune_threads_per_s_100k" if ctx.full else "prune_threads_per_s_1k"] = round(len(chosen) / seconds, 1)
        r["prune_threads_sampled"] = len(chosen)
        ctx.log(f"  keep_last 10 over {len(chosen)} of {threads} threads: {len(chosen) / seconds:.1f} threads/s "
                f"({statuses.count('pruned')} pruned)")
    ctx.notes.append("Retention: `prune_threads_per_s_100k` is keep_last(10) with backups, one process, over an "
                     "evenly spaced sample of the 100k-thread database; `prune_ratio_to_delete_floor` compares "
                     "keep_last(10) without backup of a ~1,000-checkpoint delta thread with a plain DELETE of the "
                     "same rows from an identical thread.")
