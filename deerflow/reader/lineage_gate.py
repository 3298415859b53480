"""The thread-level full-mode gate: does a checkpoint or any ancestor show delta evidence?"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deerflow.storage.sqlread import reader_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["lineage_has_delta_evidence"]


def lineage_has_delta_evidence(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str,
                               checkpoint_id: str) -> bool:
    """True when the checkpoint or any ancestor (``parent_checkpoint_id`` chain, same namespace) shows delta.

    This is the reader's thread-level gate, stricter than the spec's head-only one: LangGraph
    drops the counters on snapshot checkpoints, so a marker-less delta thread
    looks full there; its ancestors still carry the counters. ``UNION``
    drops a repeated row, so a parent cycle cannot loop.

    Cost: one index range scan of the namespace first (no row with evidence
    -- every full thread -- answers False without walking); otherwise the
    walk, which stops at the first evidence (usually the checkpoint itself).
    """
    reader = reader_for(saver)
    r = reader
    evidence = (f"EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = ? AND c.checkpoint_ns = ? "
                f"AND {r.delta_evidence()})")
    any_evidence = reader.query(f"SELECT {r.truthy(evidence)} AS e", [thread_id, checkpoint_ns])
    if not any_evidence[0]["e"]:
        return False
    sql = f"""
        WITH RECURSIVE lineage(checkpoint_id, parent_checkpoint_id, delta) AS (
            SELECT c.checkpoint_id, c.parent_checkpoint_id,
                   {r.truthy(r.delta_evidence())}
            FROM checkpoints c
            WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = ?
            UNION
            SELECT c.checkpoint_id, c.parent_checkpoint_id,
                   {r.truthy(r.delta_evidence())}
            FROM lineage l JOIN checkpoints c
              ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = l.parent_checkpoint_id
            WHERE l.delta = 0
        )
        SELECT MAX(delta) AS delta FROM lineage
    """
    rows = reader.query(sql, [thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns])
    return bool(rows and rows[0]["delta"])
