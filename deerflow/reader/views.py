"""What a thread read returns: the typed views, and the facts read from a raw saver tuple alone.

:class:`StateView` is one materialized checkpoint, :class:`CheckpointRow` one
history row. The helpers here look at a raw tuple's ``checkpoint`` dict only
(no saver, no replay): what it stores for ``messages``, the nodes it
schedules, channels DeerFlow's schema does not declare, and ``Overwrite``
wrappers stored as values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deerflow._langgraph_compat import _DeltaSnapshot, _get_overwrite
from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.runtime.checkpoint_mode import INTERNAL_CHECKPOINT_MODE_KEY

__all__ = ["CheckpointRow", "StateView", "clean_metadata", "messages_stored", "pending_nodes",
           "unknown_channels", "unwrap_overwrites"]


@dataclass(frozen=True)
class StateView:
    """A materialized checkpoint as the pages and the API show it.

    Attributes:
        thread_id, checkpoint_id, checkpoint_ns, parent_checkpoint_id: addressing.
        created_at: the checkpoint's ``ts`` (ISO 8601) or ``None``.
        metadata: stored metadata (the internal routing key never appears).
        values: materialized channel values; ``values["messages"]`` holds message objects.
        next: nodes scheduled next (tuple of names).
        findings: what the stored data says that a plain reading would hide, each
            ``{"kind", "channel", "detail"}``; ``kind`` ``overwrite_in_blob``: the
            channel's stored value was an ``Overwrite`` wrapper (any of LangGraph's
            three forms); ``values`` holds its payload; ``reader_disagreement``: LangGraph's
            reader reads this checkpoint's ``messages`` differently from the replay rule
            shown (also ``reason`` (a :data:`deerflow.reader.compare.REASONS` key),
            ``message_count``, ``langgraph_message_count``).
        pending_writes: the raw tuple's ``pending_writes`` as the saver returned them
            (``[(task_id, channel, value)]``; what :func:`dashboard.threads.writes.pending_writes`
            shows without reading the checkpoint again), or ``None`` when not read.
    """

    thread_id: str
    checkpoint_id: str
    checkpoint_ns: str
    parent_checkpoint_id: str | None
    created_at: str | None
    metadata: dict[str, Any]
    values: dict[str, Any]
    next: tuple[str, ...]
    findings: tuple[dict[str, Any], ...] = ()
    pending_writes: list[tuple[str, str, Any]] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class CheckpointRow:
    """One history row: storage facts plus the materialized message count.

    ``message_count`` is ``None`` when the checkpoint's messages cannot be
    reconstructed; ``problem`` then says why, with the error code its state
    read answers: ``history_incomplete`` (a delta replay chain with a missing
    link: see :mod:`deerflow.reader.lineage`), ``reducer_error`` (a stored write
    the reducer refuses: see :mod:`deerflow.reader.replaycheck`) or
    ``branch_ambiguous`` (sibling forks' writes: see :mod:`deerflow.reader.compare`).
    ``disagreement`` (a :data:`deerflow.reader.compare.REASONS` key) and
    ``langgraph_message_count`` are set where LangGraph's reader counts
    differently from ``message_count`` (the replay rule's).
    """

    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint_ns: str
    step: int | None
    source: str | None
    created_at: str | None
    mode: str
    messages_stored: str
    message_count: int | None
    problem: str | None = None
    disagreement: str | None = None
    langgraph_message_count: int | None = None


def messages_stored(channel_values: dict[str, Any]) -> str:
    """What a raw saver tuple holds for ``messages``: ``plain``, ``delta_snapshot`` or ``absent``."""
    if "messages" not in channel_values or channel_values["messages"] is None:
        return "absent"
    if isinstance(channel_values["messages"], _DeltaSnapshot):
        return "delta_snapshot"
    return "plain"


def pending_nodes(checkpoint: dict[str, Any]) -> tuple[str, ...]:
    """The nodes a resumed run would execute next, read from the raw checkpoint alone.

    The accessor's graph is a one-node state-mutation graph, not the agent
    graph that wrote the thread, so ``StateSnapshot.next`` computed against
    it is always empty. LangGraph triggers a node when one of its trigger
    channels (``__start__`` for the input node, ``branch:to:<node>`` for
    every other node) holds a value, was updated by the last step
    (``updated_channels``; every channel when that is ``None``, as after
    ``update_state``), and has a newer version than the node has seen. Nodes
    scheduled with ``Send`` are read from the ``__pregel_tasks`` channel.

    Args:
        checkpoint: a raw checkpoint dict (``channel_values``, ``channel_versions``, ``versions_seen``).

    Returns:
        Node names, sorted.
    """
    values = checkpoint.get("channel_values") or {}
    versions = checkpoint.get("channel_versions") or {}
    seen = checkpoint.get("versions_seen") or {}
    updated = checkpoint.get("updated_channels")
    nodes: set[str] = set()
    for channel, version in versions.items():
        if (updated is not None and channel not in updated) or channel not in values:
            continue
        if channel == "__start__":
            node = "__start__"
        elif channel.startswith("branch:to:"):
            node = channel[len("branch:to:"):]
        elif channel == "__pregel_tasks":
            nodes.update(str(getattr(send, "node", send)) for send in values[channel] or [])
            continue
        else:
            continue
        node_seen = (seen.get(node) or {}).get(channel)
        if node_seen is None or node_seen < version:
            nodes.add(node)
    return tuple(sorted(nodes))


def unknown_channels(mode: str, snapshot_frequency: int, checkpoint: dict[str, Any]) -> dict[str, Any]:
    """Stored channels that DeerFlow's state schema does not declare (added by middleware), as stored.

    The accessor materializes through DeerFlow's schema, which would silently
    leave them out; they are shown raw instead, never dropped. LangGraph's
    internal channels (``__start__``, ``branch:to:<node>``, ...) are not state.

    Args:
        mode, snapshot_frequency: the process's frozen channel mode and cadence (they pick the schema).
        checkpoint: a raw checkpoint dict.

    Returns:
        ``{channel: stored value}`` for each undeclared state channel.
    """
    schema: Any = get_thread_state_schema(mode, snapshot_frequency)  # a TypedDict class
    known = set(schema.__required_keys__) | set(schema.__optional_keys__)
    return {name: value for name, value in (checkpoint.get("channel_values") or {}).items()
            if name not in known and not name.startswith("__") and ":" not in name}


def clean_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The stored metadata without the internal routing key (``INTERNAL_CHECKPOINT_MODE_KEY``)."""
    return {k: v for k, v in (metadata or {}).items() if k != INTERNAL_CHECKPOINT_MODE_KEY}


def unwrap_overwrites(values: dict[str, Any]) -> tuple[dict[str, str], ...]:
    """Replace, in place, each stored ``Overwrite`` wrapper by its payload; one finding each.

    LangGraph stores the first value a default-less reducer channel receives
    verbatim, an ``Overwrite`` included (DeerFlow #4380, LangGraph #9017), and
    a JSON round trip turns one into ``{"value": ..., "type": "__overwrite__"}``
    or ``{"__overwrite__": ...}``; LangGraph's ``_get_overwrite`` reads all three.

    Args:
        values: materialized channel values (modified in place).

    Returns:
        One ``{"kind": "overwrite_in_blob", "channel", "detail"}`` finding per unwrapped channel, by name.
    """
    found = []
    for name in sorted(values):
        is_overwrite, payload = _get_overwrite(values[name])
        if is_overwrite:
            values[name] = payload
            found.append({"kind": "overwrite_in_blob", "channel": name,
                          "detail": f"the stored value of channel {name!r} is an Overwrite wrapper "
                                    f"({type(values[name]).__name__} payload shown); LangGraph applies it as "
                                    "a replacement of the channel's value"})
    return tuple(found)
