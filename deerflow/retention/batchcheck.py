"""What a batch prune is verified against before commit, read from what is left of its threads.

A batch prune (LangGraph's ``keep_latest`` in :mod:`deerflow.retention.delegate`, our own statements in
:mod:`deerflow.retention.setbatch`) is checked the same way: exactly the planned checkpoints remain, the
kept checkpoints' stored bytes (rows without the parent link, the blobs they name, their writes rows) are
unchanged, the writes rows under no checkpoint are the ones before, and no blob is left that no kept
checkpoint references. What is read is what is left (a few rows per thread), never the deleted rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deerflow.errors import DeerFlowError
from deerflow.retention.batchfacts import BatchFacts, parse_writes_facts, writes_facts_sql
from deerflow.retention.proof import UNNEST_KEYS, kept_digest_sql
from deerflow.retention.setbased import key_columns

__all__ = ["After", "BatchRollback", "read_after", "verify_batch"]

_Key = tuple[str, str]


class BatchRollback(DeerFlowError):
    """A batch's verification failed (args: the first thread that failed it): roll the batch back and prune its
    threads one by one on the per-thread path. Never leaves the package."""


@dataclass
class After:
    """One thread after a batch prune: the checkpoints left, the writes rows under no checkpoint, the blobs no
    checkpoint left references, the bytes in LangGraph's three tables, and the kept checkpoints' digest
    (:func:`~deerflow.retention.proof.kept_digest_sql`)."""

    left: set[_Key]
    orphan_writes: set[_Key]
    unreferenced_blobs: int
    stored_bytes: int
    kept_digest: str = ""


def read_after(session: Any, kept: dict[str, set[_Key]]) -> dict[str, After]:
    """Every pruned thread's :class:`After`, in one statement (what is left is a few rows per thread).

    Args:
        kept: ``{thread_id: the checkpoints its plan keeps}``; their digest is read with the rest.
    """
    d = session.dialect
    thread_ids = list(kept)
    keys = key_columns(sorted((t, *k) for t, ks in kept.items() for k in ks))
    out = {t: After(set(), set(), 0, 0) for t in thread_ids}
    rows = session.query(
        f"SELECT 'c' AS part, thread_id, checkpoint_ns AS ns, checkpoint_id AS id, {d.checkpoint_bytes(None)} AS b "
        "FROM checkpoints WHERE thread_id = ANY(?) "
        f"UNION ALL SELECT 'w', * FROM ({writes_facts_sql(d)}) AS w "
        "UNION ALL SELECT 'u', b.thread_id, NULL, NULL, COUNT(*) FROM checkpoint_blobs b WHERE b.thread_id = ANY(?) "
        "AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = ANY(?) AND c.thread_id = b.thread_id AND "
        "c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version) "
        "GROUP BY b.thread_id "
        f"UNION ALL SELECT 'h', thread_id, NULL, digest, NULL FROM ({kept_digest_sql(d.writes_table, UNNEST_KEYS)}) "
        "AS h",
        [*[thread_ids] * 7, *keys, *keys, *keys])
    for r in rows:
        if r["part"] == "c":
            out[r["thread_id"]].left.add((r["ns"], r["id"]))
            out[r["thread_id"]].stored_bytes += int(r["b"] or 0)
        elif r["part"] == "u":
            out[r["thread_id"]].unreferenced_blobs = int(r["b"])
        elif r["part"] == "h":
            out[r["thread_id"]].kept_digest = str(r["id"])
    orphans, sizes = parse_writes_facts([r for r in rows if r["part"] == "w"], thread_ids)
    for t in thread_ids:
        out[t].orphan_writes, out[t].stored_bytes = orphans[t], out[t].stored_bytes + sizes[t]
    return out


def verify_batch(kept: dict[str, set[_Key]], before: dict[str, BatchFacts], after: dict[str, After],
                 kept_digest: dict[str, str]) -> None:
    """Exactly the planned checkpoints left, their stored bytes unchanged, no writes row of a deleted checkpoint
    (the writes rows under no checkpoint are the ones before) and no blob that no kept checkpoint references
    (so none a deleted one used; a thread that had such blobs before is left to our own path).

    Raises:
        BatchRollback: a thread fails one of these (the first one found).
    """
    for t, keys in kept.items():
        if after[t].left != keys or after[t].orphan_writes != before[t].orphan_writes \
                or after[t].unreferenced_blobs or after[t].kept_digest != kept_digest[t]:
            raise BatchRollback(t)
