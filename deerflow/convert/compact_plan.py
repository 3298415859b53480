"""Where a full->delta compaction stores ``_DeltaSnapshot`` s, and what each rewritten checkpoint looks like.

The rule is the one LangGraph's loop applies when it writes a checkpoint with
a ``DeltaChannel`` (``pregel/_loop.py`` ``_put_checkpoint``,
``pregel/_checkpoint.py`` ``delta_channels_to_snapshot``), replayed over a
stored history instead of a live run. For each checkpoint ``c`` of one
namespace, parents first::

    (u, s) = counters(parent(c)) + (1 if c updated messages else 0, 1)     # (0, 0) above a root
    snapshot(c) = c has a messages version and (u >= K or s >= MAX_SUPERSTEPS or forced(c))
    counters(c) = (0, 0) if snapshot(c) else (u, s)

``counters`` is LangGraph's ``counters_since_delta_snapshot["messages"]``
(omitted from the metadata when ``(0, 0)``), ``K`` the process cadence,
``MAX_SUPERSTEPS`` LangGraph's ``DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT`` bound.
"c updated messages" is ``"messages" in c.updated_channels`` (its version
moving, for checkpoints written before LangGraph stored ``updated_channels``).
``forced(c)``: the stored value is not what LangGraph's reader would get by
replaying the writes stored under the parent onto the parent's value (an
``Overwrite`` through ``update_state``, a summarization that replaced the
list, a fork whose parent holds a sibling's writes, pruned writes, a first
checkpoint that already holds messages) -- reason ``writes`` -- or an
already-delta checkpoint replays from ``c`` (the seam of a migrated thread)
-- reason ``seam``.

Already-delta checkpoints are left as they are; their stored counters carry
on to any full descendant. A thread's first checkpoint written by DeerFlow's
create-thread endpoint (no parent, no channel versions) is left as it is too:
a delta-mode process writes it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from deerflow._langgraph_compat import DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT, _DeltaSnapshot
from deerflow.convert.encoding import MessageDigester
from deerflow.convert.onepass import replay
from deerflow.convert.walk import Entry
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_DELTA,
    CHECKPOINT_MODE_METADATA_KEY,
    COUNTERS_METADATA_KEY,
    checkpoint_metadata_uses_delta,
)

if TYPE_CHECKING:
    from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple

__all__ = ["MAX_SUPERSTEPS", "Decision", "SnapshotPlanner", "compacted_row", "is_full_checkpoint"]

MESSAGES = "messages"
#: LangGraph's supersteps bound on replay depth (env ``LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT``).
MAX_SUPERSTEPS = DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT


def _stub(tup: CheckpointTuple) -> bool:
    return tup.parent_config is None and not (tup.checkpoint.get("channel_versions") or {})


def is_full_checkpoint(tup: CheckpointTuple) -> bool:
    """True for a checkpoint a full-mode process wrote, which a compaction rewrites.

    Delta evidence (the DeerFlow marker, LangGraph's ``messages`` counter, a
    stored ``_DeltaSnapshot``) means delta; a stored message list, or no
    ``messages`` channel at all (a run's first input checkpoint), means full;
    a ``messages`` version with nothing stored is delta (full mode stores the
    value at every version). The create-thread stub is never rewritten.
    """
    if checkpoint_metadata_uses_delta(tup.metadata) or _stub(tup):
        return False
    stored = tup.checkpoint["channel_values"].get(MESSAGES)
    if isinstance(stored, _DeltaSnapshot):
        return False
    if stored is None:
        return MESSAGES not in (tup.checkpoint.get("channel_versions") or {})
    return True


@dataclass(frozen=True)
class Decision:
    """What the compaction stores for one full checkpoint.

    Attributes:
        snapshot: store ``_DeltaSnapshot(value)`` for ``messages`` (else leave the channel out).
        reason: ``cadence``, ``supersteps``, ``writes`` or ``seam`` when ``snapshot``; else ``None``.
        counters: ``(updates, supersteps)`` since the last snapshot, as LangGraph stores them ((0, 0) after one).
    """

    snapshot: bool
    reason: str | None
    counters: tuple[int, int]


class SnapshotPlanner:
    """Decides, checkpoint by checkpoint in walk order (parents first), where snapshots go.

    Args:
        snapshot_frequency: the cadence K (updates, >= 1).
        digest: the walk's :class:`MessageDigester` (so each distinct message is hashed once).

    Keeps per checkpoint of the namespace being walked: its counters, its
    ``messages`` version and the digest of what its children read without a
    seed of their own (strings and small tuples, never message lists).
    """

    def __init__(self, snapshot_frequency: int, digest: MessageDigester):
        if snapshot_frequency < 1:
            raise ValueError(f"snapshot_frequency must be at least 1, got {snapshot_frequency}")
        self.k = snapshot_frequency
        self.digest = digest
        self._empty = digest([])
        self.begin_namespace({})

    def begin_namespace(self, tuples: dict[str, Any]) -> None:
        """Start a namespace: ``tuples`` are its checkpoints by id (from :class:`~deerflow.convert.walk.Walk`)."""
        self.counters: dict[str, tuple[int, int]] = {}
        self.versions: dict[str, Any] = {}
        self.passed: dict[str, str] = {}
        self.seams: set[str] = set()
        for tup in tuples.values():
            if tup.parent_config is not None and not is_full_checkpoint(tup):
                self.seams.add(tup.parent_config["configurable"]["checkpoint_id"])

    def decide(self, e: Entry, writes: list[Any]) -> Decision | None:
        """The decision for ``e`` (``None``: not a full checkpoint, left as is), recording what children need.

        Args:
            e: the checkpoint with its materialized value (``e.value`` not ``None``).
            writes: the ``messages`` write values stored under ``e`` (saver order).
        """
        tup, cid = e.tup, e.checkpoint_id
        parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        versions = tup.checkpoint.get("channel_versions") or {}
        version = versions.get(MESSAGES)
        self.versions[cid] = version
        if e.value is not None:
            self.passed[cid] = self.digest(replay(e.value, writes)) if writes else e.digest or self._empty
        if not is_full_checkpoint(tup):
            metadata: dict[str, Any] = dict(tup.metadata)
            stored = (metadata.get(COUNTERS_METADATA_KEY) or {}).get(MESSAGES)
            self.counters[cid] = (int(stored[0]), int(stored[1])) if stored else (0, 0)
            return None
        u, s = self.counters.get(parent, (0, 0)) if parent is not None else (0, 0)
        updated = tup.checkpoint.get("updated_channels")
        if updated is not None:
            u += MESSAGES in updated
        elif version is not None:
            u += parent is None or self.versions.get(parent) != version
        s += 1
        reason = None
        if version is not None:
            if cid in self.seams:
                reason = "seam"
            elif e.digest != (self.passed.get(parent) if parent is not None else self._empty):
                reason = "writes"
            elif u >= self.k:
                reason = "cadence"
            elif s >= MAX_SUPERSTEPS:
                reason = "supersteps"
        counters = (0, 0) if reason else (u, s)
        self.counters[cid] = counters
        return Decision(reason is not None, reason, counters)


def compacted_row(tup: CheckpointTuple, value: list[Any] | None,
                  decision: Decision) -> tuple[Checkpoint, CheckpointMetadata]:
    """``(checkpoint, metadata)`` a delta-mode DeerFlow process would have stored for this full checkpoint.

    ``channel_values["messages"]`` is ``_DeltaSnapshot(value)`` at a snapshot and
    absent otherwise; the metadata gains the DeerFlow marker and LangGraph's
    ``messages`` counter (dropped at ``(0, 0)``, other channels' counters kept).
    Every other channel, version, ``versions_seen`` and id is the stored one.
    """
    checkpoint = tup.checkpoint.copy()
    values = dict(checkpoint["channel_values"])
    if decision.snapshot:
        values[MESSAGES] = _DeltaSnapshot(list(value or []))
    else:
        values.pop(MESSAGES, None)
    checkpoint["channel_values"] = values
    metadata: dict[str, Any] = dict(tup.metadata)
    metadata[CHECKPOINT_MODE_METADATA_KEY] = CHECKPOINT_MODE_DELTA
    counters = {k: v for k, v in (metadata.get(COUNTERS_METADATA_KEY) or {}).items() if k != MESSAGES}
    if decision.counters != (0, 0):
        counters[MESSAGES] = list(decision.counters)
    if counters:
        metadata[COUNTERS_METADATA_KEY] = counters
    else:
        metadata.pop(COUNTERS_METADATA_KEY, None)
    # LangGraph's metadata is open (DeerFlow's marker and LangGraph's counters are keys its TypedDict does not name)
    return checkpoint, cast("CheckpointMetadata", metadata)
