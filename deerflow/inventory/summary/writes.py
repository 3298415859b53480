"""Per-thread write facts by time bucket, kept next to the summary, so the audit's window never scans ``checkpoints``.

The audit's "writers seen in the last N hours" (:func:`deerflow.inventory.census.recent_writer_facts`)
counts the checkpoints written since a UUIDv6 id, by marker kind, and the
cadences the window's snapshots prove. Scanning every checkpoint of the
window costs a pass over all of them when the window holds most of the data
(seconds at 100k threads). The refresh keeps instead, per thread and per
*bucket* (the first :data:`BUCKET_CHARS` hex digits of the checkpoint id: UUIDv6
ids start with the high bits of their 100 ns timestamp, so a bucket is
2^32 x 100 ns = 429.5 s, about 7 minutes, and buckets sort like ids):

* ``dfa_thread_writes(thread_id, bucket, checkpoints, marked, counters_only)``;
* ``dfa_thread_write_snapshots(thread_id, bucket, cadence, supersteps, snapshots)``:
  the cadence snapshots of :func:`deerflow.inventory.summary.cadences.snapshot_sql` (``u + 1``),
  by the parent's supersteps counter ``s`` (``-1`` when absent), so a reader drops
  the ones the supersteps bound may have caused exactly as a scan does.

A window starting at id ``S`` is then the buckets after ``S``'s bucket (sums over
these rows) plus the part of ``S``'s own bucket at or after ``S`` (an index range
scan of at most one bucket of checkpoints). The rows of a thread are replaced
whenever its summary row is recomputed, so they are as current as the summary.
Cost: one row per thread and bucket it was written in (at most one per checkpoint).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from deerflow.inventory.summary.cadences import snapshot_sql
from deerflow.storage.sqlread import SqlReader, Tx

__all__ = ["BUCKET_CHARS", "bucket_bounds", "id_floor", "replace_writes"]

#: Hex digits of a checkpoint id that name its bucket (7: 2^32 x 100 ns = 429.5 s per bucket).
BUCKET_CHARS = 7


def id_floor(moment: dt.datetime) -> str:
    """The smallest UUIDv6 string created at ``moment``: every checkpoint id made then or later sorts above it."""
    ticks = int((moment - dt.datetime(1582, 10, 15, tzinfo=dt.UTC)).total_seconds() * 10_000_000)
    h = f"{ticks >> 28:08x}{(ticks >> 12) & 0xFFFF:04x}6{ticks & 0xFFF:03x}" + "0" * 16
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def bucket_bounds(since_checkpoint_id: str) -> tuple[str, str] | None:
    """``(bucket, next_bucket_floor)`` of the bucket holding ``since_checkpoint_id``.

    Every id whose bucket sorts after ``bucket`` is at least ``next_bucket_floor``
    (the smallest id of the next bucket, same format). ``None`` when the id does not
    start with :data:`BUCKET_CHARS` lowercase hex digits (not a UUID: no buckets).
    """
    head = since_checkpoint_id[:BUCKET_CHARS]
    if len(head) != BUCKET_CHARS or any(ch not in "0123456789abcdef" for ch in head) or head == "f" * BUCKET_CHARS:
        return None
    nxt = f"{int(head, 16) + 1:0{BUCKET_CHARS}x}" + "0" * (8 - BUCKET_CHARS)
    return head, f"{nxt}-0000-0000-0000-000000000000"


def replace_writes(tx: Tx, reader: SqlReader, where: str, params: list[Any]) -> None:
    """Recompute the ``dfa_thread_writes`` and ``dfa_thread_write_snapshots`` rows of the threads matching ``where``.

    Args:
        where: a filter on a column named ``thread_id`` (as for
            :func:`deerflow.inventory.summary.cadences.replace_cadences`), e.g. ``"thread_id IN (?, ?)"``.
        params: its parameters (once).
    """
    r = reader
    on_c = where.replace("thread_id", "c.thread_id")
    bucket = f"substr(c.checkpoint_id, 1, {BUCKET_CHARS})"
    tx.execute(f"DELETE FROM dfa_thread_writes WHERE {where}", params)
    tx.execute(
        "INSERT INTO dfa_thread_writes (thread_id, bucket, checkpoints, marked, counters_only) "
        f"SELECT c.thread_id, {bucket}, COUNT(*), SUM({r.truthy(r.marker())}), "
        f"SUM({r.truthy(f'{r.counters()} AND NOT {r.marker()}')}) FROM checkpoints c WHERE {on_c} "
        f"GROUP BY c.thread_id, {bucket}", params)
    tx.execute(f"DELETE FROM dfa_thread_write_snapshots WHERE {where}", params)
    tx.execute(
        "INSERT INTO dfa_thread_write_snapshots (thread_id, bucket, cadence, supersteps, snapshots) "
        f"SELECT thread_id, substr(checkpoint_id, 1, {BUCKET_CHARS}), u + 1, COALESCE(s, -1), COUNT(*) "
        f"FROM ({snapshot_sql(r, 'AND ' + on_c)}) sn WHERE u IS NOT NULL "
        f"GROUP BY thread_id, substr(checkpoint_id, 1, {BUCKET_CHARS}), u + 1, COALESCE(s, -1)", params)
