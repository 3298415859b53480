"""Conversion of 1,000-checkpoint delta threads: one-pass vs naive, vs the write floor, and throughput.

All threads are copies of one recorded template (same shape and bytes), in
one scratch Postgres database:

* ``convert_onepass_s``: :func:`deerflow.convert.convert_thread` without the
  optional integrity check (the one-pass converter: read, materialize once,
  back up, rewrite, verify, commit); ``convert_integrity_s`` with it;
* ``convert_naive_s``: materialize every checkpoint with LangGraph's
  ``get_state`` (through the accessor) and rewrite it with the saver's
  ``put`` -- the same output rows, no backup, no verification -- rolled back;
* ``convert_write_floor_s``: a binary ``COPY`` of the converted thread's
  output rows (its checkpoints and ``messages`` blobs) under a new thread id,
  committed: merely writing the same bytes;
* ``convert_threads_per_s_1w`` / ``_2w``: whole conversions (integrity check on,
  the dashboard jobs' default) by one process and by two in parallel.

Ratios: ``convert_speedup_vs_naive`` = naive / one-pass,
``convert_ratio_to_write_floor`` = one-pass / floor,
``convert_integrity_ratio_to_write_floor`` = the median conversion with the
integrity check on / the median floor of the same threads' output (issue 16: <= 2).
"""

from __future__ import annotations

import statistics
import struct
import time
import uuid
from typing import Any

import psycopg

from benchmarks.common import Context, scratch_database, throughput, timed
from deerflow.convert import convert_thread
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, COUNTERS_METADATA_KEY
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.seed import SeedPlan, seed_threads
from deerflow.storage.sessions import open_session


def _config(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def _clean(metadata: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in metadata.items() if k != CHECKPOINT_MODE_METADATA_KEY}
    counters = {k: v for k, v in (out.pop(COUNTERS_METADATA_KEY, None) or {}).items() if k != "messages"}
    if counters:
        out[COUNTERS_METADATA_KEY] = counters
    return out


def naive_convert(database: Any, thread_id: str) -> int:
    """Per-checkpoint ``get_state`` + ``put`` of the full list, in one transaction that is rolled back.

    Newest first (the saver's order): a checkpoint's stored ``messages`` value
    is replaced only after every newer checkpoint, the only ones whose
    replay may start from it, was materialized. Returns the checkpoints rewritten (count).
    """
    with open_session(database) as session:
        reader = CheckpointStateAccessor.for_saver(session.saver, mode="delta")
        done = 0
        for ns in session.namespaces(thread_id):
            for tup in list(session.saver.list(_config(thread_id, ns))):
                cid = tup.config["configurable"]["checkpoint_id"]
                messages = reader.get(_config(thread_id, ns, cid)).values.get("messages") or []
                checkpoint = dict(tup.checkpoint)
                checkpoint["channel_values"] = {**checkpoint["channel_values"], "messages": messages}
                versions = checkpoint.get("channel_versions", {})
                new_versions = {"messages": versions["messages"]} if "messages" in versions else {}
                if new_versions:  # the saver's blob upsert keeps an existing row: replace it
                    session.execute("DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? AND "
                                    "channel = 'messages' AND version = ?", [thread_id, ns, str(versions["messages"])])
                parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
                session.saver.put(_config(thread_id, ns, parent), checkpoint, _clean(tup.metadata), new_versions)
                done += 1
        session.rollback()
    return done


def _field(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def write_floor(database: Any, thread_id: str) -> float:
    """Seconds to COPY the thread's checkpoints and ``messages`` blobs (as they are now) under a new id and commit."""
    copy_id = f"floor-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database.postgres_url) as conn:
        checkpoints = conn.execute(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint::text, metadata::text "
            "FROM checkpoints WHERE thread_id = %s", (thread_id,)).fetchall()
        blobs = conn.execute("SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
                             "WHERE thread_id = %s AND channel = 'messages'", (thread_id,)).fetchall()
        conn.rollback()
        tid = _field(copy_id.encode())
        header = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
        rows_c = [struct.pack(">h", 7) + tid + b"".join(_field(None if v is None else v.encode()) for v in r[:4])
                  + _field(b"\x01" + r[4].encode()) + _field(b"\x01" + r[5].encode()) for r in checkpoints]
        rows_b = [struct.pack(">h", 6) + tid + b"".join(_field(v.encode()) for v in r[:4]) + _field(r[4])
                  for r in blobs]
        start = time.perf_counter()
        with conn.cursor() as cur:
            with cur.copy("COPY checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
                          "checkpoint, metadata) FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(header + b"".join(rows_c) + struct.pack(">h", -1))
            with cur.copy("COPY checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
                          "FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(header + b"".join(rows_b) + struct.pack(">h", -1))
        conn.commit()
        seconds = time.perf_counter() - start
        conn.execute("DELETE FROM checkpoints WHERE thread_id = %s", (copy_id,))
        conn.execute("DELETE FROM checkpoint_blobs WHERE thread_id = %s", (copy_id,))
        conn.commit()
    return seconds


def read_floor(database: Any, thread_id: str) -> float:
    """Seconds to read the thread's checkpoints and ``messages`` blobs (as they are now), binary, in one transaction.

    What any job that looks at every stored value pays before it does anything
    else (a compaction must read every full-mode list to place its snapshots).
    """
    with psycopg.connect(database.postgres_url) as conn:
        start = time.perf_counter()
        with conn.cursor(binary=True) as cur:
            cur.execute("SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
                        "FROM checkpoints WHERE thread_id = %s", (thread_id,))
            cur.fetchall()
            cur.execute("SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
                        "WHERE thread_id = %s AND channel = 'messages'", (thread_id,))
            cur.fetchall()
        conn.rollback()
        return time.perf_counter() - start


def _worker(url: str, thread_ids: list[str], barrier: Any, out: Any) -> None:
    from deerflow.config.database_config import DatabaseConfig

    database = DatabaseConfig(backend="postgres", postgres_url=url)
    barrier.wait()
    statuses = [convert_thread(database, tid).status for tid in thread_ids]
    out.put((time.time(), statuses))


def run(ctx: Context) -> None:
    """Seed identical delta threads of ~1,000 checkpoints and convert them every way."""
    turns = 208 if ctx.full else 60  # about 4.8 checkpoints a turn: 1,000 (full) or 300 (small) checkpoints
    repeats, per_throughput = (3, 4) if ctx.full else (1, 2)
    n = 3 * repeats + 3 * per_throughput
    with scratch_database(ctx, "convert") as database:
        report = seed_threads(database, SeedPlan(threads=n, turns_min=turns, turns_max=turns, mode="delta",
                                                 snapshot_frequency=10, seed="bench-convert", templates=1,
                                                 fork_rate=0, text_scale=0.1, long_output_rate=0))
        ids = [s.thread_id for s in report.samples]
        r = ctx.results
        r["convert_checkpoints_per_thread"] = report.checkpoints // n
        onepass, naive, floors = [], [], []
        for i in range(repeats):
            seconds, result = timed(lambda tid=ids[i]: convert_thread(database, tid, integrity=False))
            assert result.status == "converted", result.as_dict()
            onepass.append(seconds)
            floors.append(write_floor(database, ids[i]))
            naive.append(timed(lambda tid=ids[repeats + i]: naive_convert(database, tid))[0])
            ctx.log(f"  one-pass {seconds:.2f} s, naive {naive[-1]:.2f} s, floor {floors[-1]:.2f} s "
                    f"({result.bytes_before / 1e6:.1f} MB -> {result.bytes_after / 1e6:.1f} MB)")
        r["convert_output_mb_per_thread"] = round(result.bytes_after / 1e6, 1)
        checked, checked_floors = [], []
        for tid in ids[2 * repeats:3 * repeats]:
            seconds, result = timed(lambda tid=tid: convert_thread(database, tid, integrity=True))
            assert result.status == "converted", result.as_dict()
            checked.append(seconds)
            checked_floors.append(write_floor(database, tid))
            ctx.log(f"  with integrity {seconds:.2f} s, floor {checked_floors[-1]:.2f} s")
        r["convert_integrity_s"] = round(statistics.median(checked), 2)
        r["convert_integrity_ratio_to_write_floor"] = round(
            statistics.median(checked) / statistics.median(checked_floors), 2)
        r["convert_onepass_s"] = round(statistics.median(onepass), 2)
        r["convert_naive_s"] = round(statistics.median(naive), 2)
        r["convert_write_floor_s"] = round(statistics.median(floors), 3)
        r["convert_speedup_vs_naive"] = round(r["convert_naive_s"] / r["convert_onepass_s"], 2)
        r["convert_ratio_to_write_floor"] = round(r["convert_onepass_s"] / r["convert_write_floor_s"], 2)
        rest = ids[3 * repeats:]
        one, two = rest[:per_throughput], rest[per_throughput:]
        r["convert_threads_per_s_1w"] = round(throughput(_worker, database, one, 1, "converted"), 4)
        r["convert_threads_per_s_2w"] = round(throughput(_worker, database, two, 2, "converted"), 4)
        ctx.log(f"  throughput: 1 worker {r['convert_threads_per_s_1w']} threads/s, "
                f"2 workers {r['convert_threads_per_s_2w']} threads/s")
