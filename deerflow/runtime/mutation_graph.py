"""The state-mutation graph: a one-node graph compiled from the thread schema.

Used by :class:`deerflow.runtime.checkpoint_state.CheckpointStateAccessor` to
read state with LangGraph's own read path and to apply ``update_state``
writes, and by DeerFlow code that binds its own accessor
(``CheckpointStateAccessor.bind(build_state_mutation_graph(...), saver)``).
Also DeerFlow's helpers that describe a compiled graph's channel table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph import END, START, StateGraph

from deerflow._langgraph_compat import MISSING, _get_overwrite
from deerflow.runtime.checkpoint_mode import validate_checkpoint_mode
from deerflow.runtime.state_schemas import get_thread_state_schema

__all__ = [
    "build_state_mutation_graph",
    "graph_reducer_channels",
    "graph_state_schema",
    "graph_writable_channels",
]


def _noop(state: Any) -> None:
    return None


def build_state_mutation_graph(
    as_node: str,
    mode: str,
    state_schema: type | None = None,
    *,
    snapshot_frequency: int | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> Any:
    """Compile a one-node graph used to read state and to apply ``update_state`` writes.

    The graph's channel table comes from ``state_schema`` (default: the
    thread schema for ``mode`` and the cadence), so replace-style writes wrap
    reducer channels in ``Overwrite`` and are attributed to ``as_node``
    (DeerFlow's names: ``manual_state_update``, ``manual_compaction``,
    ``rollback_restore``, ``checkpoint_resume``).

    Returns:
        A compiled LangGraph ``Pregel`` bound to ``checkpointer`` (may be None).

    Raises:
        ValueError: an empty ``as_node`` or an unknown ``mode``.
    """
    if not as_node:
        raise ValueError("build_state_mutation_graph needs as_node: the node writes are attributed to")
    mode = validate_checkpoint_mode(mode)
    schema = state_schema or get_thread_state_schema(mode, snapshot_frequency)
    builder: StateGraph[Any] = StateGraph(schema)
    builder.add_node(as_node, _noop)
    builder.add_edge(START, as_node)
    builder.add_edge(as_node, END)
    return builder.compile(checkpointer=checkpointer)


def overwrites_on_defaultless_channels(graph: Any, values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{key: plain value}`` for ``Overwrite`` writes to reducer channels that start empty-less.

    A ``BinaryOperatorAggregate`` whose type has no zero value (``list | None``:
    DeerFlow's ``sandbox``, ``todos``, ``goal``, ``promoted``) starts out
    missing, and LangGraph stores the *first* value such a channel receives
    verbatim -- an ``Overwrite`` included, which would then be read back as an
    ``Overwrite`` object instead of the list.
    """
    if not values:
        return {}
    out: dict[str, Any] = {}
    for key, value in values.items():
        channel = getattr(graph, "channels", {}).get(key)
        if not isinstance(channel, BinaryOperatorAggregate) or channel.value is not MISSING:
            continue
        is_overwrite, plain = _get_overwrite(value)
        if is_overwrite:
            out[key] = plain
    return out


def unwrap_first_writes(
    values: dict[str, Any], candidates: dict[str, Any], checkpoint_tuple: CheckpointTuple | None
) -> dict[str, Any]:
    """Replace-on-empty is a plain set: unwrap the candidates the base checkpoint never wrote.

    Args:
        values: the write as given.
        candidates: :func:`overwrites_on_defaultless_channels` of ``values``.
        checkpoint_tuple: the checkpoint written onto (``None``: nothing stored yet).

    Returns:
        ``values`` with those candidates replaced by their plain payloads (a new
        dict), or ``values`` itself when none applies.
    """
    written = checkpoint_tuple.checkpoint["channel_versions"] if checkpoint_tuple else {}
    unwrap = {k: v for k, v in candidates.items() if k not in written}
    return {**values, **unwrap} if unwrap else values


def graph_state_schema(graph: Any) -> Any | None:
    """The state schema ``graph`` was compiled from, or ``None`` when it does not say."""
    schemas = getattr(getattr(graph, "builder", None), "schemas", None)
    return next(iter(schemas), None) if schemas else None


def graph_writable_channels(graph: Any) -> frozenset[str] | None:
    """Names of ``graph``'s user-visible channels (no ``__``/``branch:`` internals); ``None`` if unknown."""
    channels = getattr(graph, "channels", None)
    if not channels:
        return None
    return frozenset(n for n in channels if not n.startswith("__") and not n.startswith("branch:"))


def graph_reducer_channels(graph: Any) -> frozenset[str] | None:
    """Channels a replace-style write must wrap in ``Overwrite`` (reducer and ``DeltaChannel``).

    ``None`` if unknown.
    """
    from langgraph.channels import DeltaChannel

    channels = getattr(graph, "channels", None)
    if channels is None:
        return None
    return frozenset(n for n, c in channels.items() if isinstance(c, BinaryOperatorAggregate | DeltaChannel))
