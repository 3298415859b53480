"""Where the one-pass replay rule and LangGraph's reader read one checkpoint differently.

The pages and the API read a delta checkpoint through LangGraph's reader (the
accessor). Two stored shapes make that reading differ from the replay rule of
:mod:`deerflow.convert.onepass`, which the converter writes:

* a stored ``messages = None`` between the anchor and the checkpoint: no seed
  for the rule (the walk goes on past it); LangGraph's base and SQLite readers
  restart from ``[]`` there and read a shorter list (LangGraph #8686);
* a checkpoint holding ``messages`` writes with several children, or with an
  ``input`` child (:func:`deerflow.reader.lineage.branch_points`): LangGraph's reader
  replays every write into every seedless child (LangGraph #8443, DeerFlow
  #4458). An ``input`` child consumed none of them, however many siblings it
  has; where two or more children may have consumed them, nothing stored says
  which write is whose (``branch_ambiguous``).

:func:`needs_comparison` is the cheap test (the replay chain the gap check
already walked, and the namespace's branch points); only then does
:func:`replay_reading` rebuild the checkpoint's value under the rule: one
``get_tuple`` per checkpoint of the chain and per sibling at a branch point
of it, then :func:`~deerflow.convert.onepass.materialize_namespace` over that
partial tree. Read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deerflow.convert.onepass import CheckpointNode, Finding, Materialized, materialize_namespace
from deerflow.reader.lineage import ReplayChain
from deerflow.storage.addressing import config_for
from deerflow.storage.sqlread import reader_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

__all__ = ["REASONS", "ReplayReading", "needs_comparison", "replay_reading"]

MESSAGES = "messages"

#: Why the two readings differ, by ``Materialized.differs`` (one sentence each, for the page and the API).
REASONS = {
    "stored_none": ("a checkpoint on the way stores messages = None: the replay rule walks past it to the "
                    "stored snapshot, LangGraph's reader restarts from an empty list there (LangGraph #8686)"),
    "fork_input": ("this branch starts with an input checkpoint forked from a checkpoint that also stores "
                   "the writes of another turn: the replay rule leaves them out (the fork never ran that "
                   "turn), LangGraph's reader replays them in (DeerFlow #4458)"),
}


@dataclass(frozen=True)
class ReplayReading:
    """One checkpoint's ``messages`` under the replay rule.

    Attributes:
        messages: the value (``None`` when a blocking finding leaves it unknown).
        differs: a :data:`REASONS` key when the rule knowingly departs from LangGraph's reader here.
        ambiguous: the ``branch_ambiguous`` finding on the way (its detail names the branch point), or ``None``.
        branch_point: the id of that branch point, or ``None``.
    """

    messages: list[Any] | None
    differs: str | None
    ambiguous: Finding | None
    branch_point: str | None


def needs_comparison(chain: ReplayChain, branch_points: frozenset[str]) -> bool:
    """True when the walk passes a stored ``None`` or a branch point above the checkpoint itself."""
    above = chain.checkpoint_ids[1:]
    return bool(chain.stored_none) or any(cid in branch_points for cid in above)


def _children(saver: BaseCheckpointSaver[Any], thread_id: str, ns: str, parent: str) -> list[str]:
    rows = reader_for(saver).query(
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND parent_checkpoint_id = ?",
        [thread_id, ns, parent])
    return [r["checkpoint_id"] for r in rows]


def _node(tup: CheckpointTuple, *, with_writes: bool, root: bool = False) -> CheckpointNode:
    values = tup.checkpoint.get("channel_values") or {}
    writes: list[tuple[str, Any, str | None]] = [
        (w[0], w[2], None) for w in (tup.pending_writes or []) if w[1] == MESSAGES
    ] if with_writes else []
    return CheckpointNode(
        checkpoint_id=tup.config["configurable"]["checkpoint_id"],
        parent_id=None if root or tup.parent_config is None else tup.parent_config["configurable"]["checkpoint_id"],
        stored=values.get(MESSAGES),
        writes=writes,
        version=(tup.checkpoint.get("channel_versions") or {}).get(MESSAGES),
        stored_none=MESSAGES in values and values[MESSAGES] is None,
        source=(tup.metadata or {}).get("source"),
    )


def replay_reading(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str, chain: ReplayChain,
                   branch_points: frozenset[str]) -> ReplayReading | None:
    """The replay rule's value of ``chain.checkpoint_ids[0]``.

    Args:
        saver: the ``SqliteSaver`` / ``PostgresSaver`` the chain was walked on.
        chain: :func:`deerflow.reader.lineage.replay_chain` of the checkpoint (whole: no gap).
        branch_points: :func:`deerflow.reader.lineage.branch_points` of the namespace.

    Returns:
        A :class:`ReplayReading`, or ``None`` when a checkpoint of the chain is no longer stored.
    """
    ids = chain.checkpoint_ids
    tuples = []
    for cid in ids:
        tup = saver.get_tuple(config_for(thread_id, checkpoint_ns, cid))
        if tup is None:
            return None
        tuples.append(tup)
    # the chain's last checkpoint (its anchor, or the namespace's root) is the root of the partial tree
    nodes = [_node(t, with_writes=i > 0, root=i == len(ids) - 1) for i, t in enumerate(tuples)]
    on_chain = set(ids)
    for cid in ids[1:]:
        if cid not in branch_points:
            continue
        for sibling in _children(saver, thread_id, checkpoint_ns, cid):
            if sibling not in on_chain and (tup := saver.get_tuple(config_for(thread_id, checkpoint_ns, sibling))):
                nodes.append(_node(tup, with_writes=False))
    target: Materialized | None = None
    ambiguous: Finding | None = None
    for item in materialize_namespace(nodes):
        if isinstance(item, Materialized) and item.checkpoint_id == ids[0]:
            target = item
        elif isinstance(item, Finding) and item.kind == "branch_ambiguous" and item.checkpoint_id in on_chain:
            ambiguous = ambiguous or item
    if target is None:
        return None
    point = None
    if ambiguous is not None:
        child = ambiguous.checkpoint_id
        point = ids[ids.index(child) + 1]
    return ReplayReading(target.messages, target.differs, ambiguous, point)
