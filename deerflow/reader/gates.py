"""The rules a thread read applies before it shows a value: the full-mode lineage gate and the replay rule.

* :func:`gate_lineage` -- a full-mode process refuses (409) a checkpoint
  whose own marker or any ancestor's carries delta evidence, stricter than
  the spec's head-only gate (LangGraph drops the counters on snapshot checkpoints).
* :class:`Branches` and :func:`replay_rule` -- where the stored shape lets
  LangGraph's reader and the replay rule read a delta checkpoint's
  ``messages`` differently (sibling forks, ``input`` children:
  :mod:`deerflow.reader.compare`), the replay rule's value and a
  ``reader_disagreement`` finding; sibling forks whose writes nothing
  attributes raise :class:`~deerflow.errors.BranchAmbiguousError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from deerflow.errors import MISMATCH_MESSAGE, BranchAmbiguousError, CheckpointModeMismatchError
from deerflow.reader.compare import REASONS, needs_comparison, replay_reading
from deerflow.reader.lineage import ReplayChain, branch_points, replay_chain, replay_chains
from deerflow.reader.lineage_gate import lineage_has_delta_evidence
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_DELTA, checkpoint_metadata_uses_delta
from deerflow.storage.addressing import config_for
from deerflow.storage.sqlread import has_sql_tables

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["Branches", "gate_lineage", "lineage_is_delta", "replay_chain_for",
           "replay_chains_for", "replay_rule"]


def lineage_is_delta(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str,
                     checkpoint_id: str) -> bool:
    """True when the checkpoint or any ancestor carries delta evidence (marker or LangGraph's counters).

    SQL savers: one recursive query (:func:`deerflow.reader.lineage_gate.lineage_has_delta_evidence`); a saver
    without SQL tables (``InMemorySaver``): the parent chain walked through ``get_tuple``, a cycle ending it.
    """
    if has_sql_tables(saver):
        return lineage_has_delta_evidence(saver, thread_id, checkpoint_ns, checkpoint_id)
    config: RunnableConfig | None = config_for(thread_id, checkpoint_ns, checkpoint_id)
    seen: set[str] = set()
    while config is not None:
        tup = saver.get_tuple(config)
        if tup is None or tup.config["configurable"]["checkpoint_id"] in seen:
            return False
        if checkpoint_metadata_uses_delta(tup.metadata):
            return True
        seen.add(tup.config["configurable"]["checkpoint_id"])
        config = tup.parent_config
    return False


def gate_lineage(saver: BaseCheckpointSaver[Any], mode: str, thread_id: str, checkpoint_ns: str,
                 checkpoint_id: str) -> None:
    """Refuse, in a full-mode process, a checkpoint whose lineage is delta.

    Raises:
        CheckpointModeMismatchError: ``mode`` is not delta and :func:`lineage_is_delta` holds (409).
    """
    if mode != CHECKPOINT_MODE_DELTA and lineage_is_delta(saver, thread_id, checkpoint_ns, checkpoint_id):
        raise CheckpointModeMismatchError(MISMATCH_MESSAGE, thread_id=thread_id)


def replay_chain_for(saver: BaseCheckpointSaver[Any], mode: str, thread_id: str, checkpoint_ns: str,
                     checkpoint_id: str) -> ReplayChain:
    """Delta mode: the checkpoint's replay walk and its break, if any (full mode replays nothing: empty)."""
    if mode != CHECKPOINT_MODE_DELTA:
        return ReplayChain(None, (), frozenset())
    return replay_chain(saver, thread_id, checkpoint_ns, checkpoint_id)


def replay_chains_for(saver: BaseCheckpointSaver[Any], mode: str, thread_id: str, checkpoint_ns: str,
                      checkpoint_ids: list[str]) -> dict[str, ReplayChain]:
    """:func:`replay_chain_for` of every checkpoint of a history page, by id (one query on Postgres)."""
    if mode != CHECKPOINT_MODE_DELTA:
        return {cid: ReplayChain(None, (), frozenset()) for cid in checkpoint_ids}
    return replay_chains(saver, thread_id, checkpoint_ns, checkpoint_ids)


class Branches:
    """A namespace's branch points, queried once per read and only when a replay chain is longer than one.

    Args:
        among: only these candidates (a single checkpoint's replay chain above it: all its read asks
            about); ``None``: every branch point of the namespace (a history page's rows share them).
    """

    def __init__(self, saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str,
                 among: Sequence[str] | None = None):
        self.saver, self.thread_id, self.ns, self.among = saver, thread_id, checkpoint_ns, among
        self._found: frozenset[str] | None = None

    def get(self) -> frozenset[str]:
        """The branch points (:func:`deerflow.reader.lineage.branch_points`), cached."""
        if self._found is None:
            self._found = branch_points(self.saver, self.thread_id, self.ns, self.among)
        return self._found


def replay_rule(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str, chain: ReplayChain,
                branches: Branches, theirs: Any) -> tuple[list[Any], dict[str, Any]] | None:
    """Where the shape lets LangGraph's reader (``theirs``) differ from the replay rule: the rule's value.

    Args:
        chain: the checkpoint's replay walk (:func:`replay_chain_for`); its first id is the checkpoint.
        theirs: LangGraph's reading of the checkpoint's ``messages``.

    Returns:
        ``None`` when the shape rules a difference out or both agree; else ``(messages, finding)``
        with a ``reader_disagreement`` finding giving both counts and the reason.

    Raises:
        BranchAmbiguousError: the walk passes sibling forks whose writes nothing stored attributes.
    """
    if len(chain.checkpoint_ids) < 2 or not needs_comparison(chain, branches.get()):
        return None
    reading = replay_reading(saver, thread_id, checkpoint_ns, chain, branches.get())
    cid = chain.checkpoint_ids[0]
    if reading is None:
        return None
    if reading.ambiguous is not None:
        point = reading.branch_point or "?"
        raise BranchAmbiguousError(thread_id, cid, checkpoint_ns, branch_point=point,
                                   reason=reading.ambiguous.detail.removeprefix(f"branch point {point} "))
    ours = reading.messages
    theirs = theirs if isinstance(theirs, list) else []
    if ours is None or ours == theirs:
        return None
    reason = REASONS.get(reading.differs or "",
                         "the replay rule and LangGraph's reader replay different writes")
    return ours, {"kind": "reader_disagreement", "channel": "messages", "reason": reading.differs,
                  "message_count": len(ours), "langgraph_message_count": len(theirs),
                  "detail": f"LangGraph's reader reads {len(theirs)} messages at this checkpoint, "
                            f"the replay rule {len(ours)} (shown): {reason}"}
