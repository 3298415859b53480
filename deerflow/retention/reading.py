"""Readings of checkpoints through LangGraph's own reader, the yardstick a prune is verified against.

The accessor is built in ONE place (:func:`langgraph_reader`), so a change
of :class:`~deerflow.runtime.checkpoint_state.CheckpointStateAccessor`'s
constructor is a one-line change here. Its graph (the delta-mode state
graph ``CheckpointStateAccessor.for_saver`` compiles) is compiled once per
cadence and copied onto each saver: compiling it is most of an accessor's
cost, and a prune reads through a new one per thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from deerflow.convert.digest import channels_sha256, messages_sha256
from deerflow.runtime.checkpoint_mode import resolve_checkpoint_snapshot_frequency
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.runtime.mutation_graph import build_state_mutation_graph
from deerflow.storage.addressing import config_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["Reading", "config_for", "langgraph_reader", "langgraph_values", "read_through_langgraph",
           "replayed_channels"]

Reading = tuple[str, str]  # (messages_sha256, channels_sha256)


def langgraph_reader(saver: BaseCheckpointSaver[Any]) -> CheckpointStateAccessor:
    """A delta-mode accessor over ``saver`` (a delta-mode process reads both modes), as
    ``CheckpointStateAccessor.for_saver(saver, mode="delta")`` builds it."""
    graph = _reading_graph(resolve_checkpoint_snapshot_frequency())
    return CheckpointStateAccessor(graph.copy(update={"checkpointer": saver}), saver, mode="delta")


@functools.lru_cache(maxsize=4)
def _reading_graph(snapshot_frequency: int) -> Any:
    """The delta-mode state graph ``for_saver`` compiles (default node and schema), without a checkpointer."""
    return build_state_mutation_graph("manual_state_update", "delta", snapshot_frequency=snapshot_frequency)


def read_through_langgraph(saver: BaseCheckpointSaver[Any], thread_id: str, keys: Iterable[tuple[str, str]],
                           digest: Callable[[list[Any]], str] = messages_sha256) -> dict[tuple[str, str], Reading]:
    """``{(checkpoint_ns, checkpoint_id): (messages_sha256, channels_sha256)}`` read by LangGraph's reader.

    Args:
        saver: the saver to read through (the session's, inside its transaction).
        thread_id: the thread.
        keys: ``(checkpoint_ns, checkpoint_id)`` pairs to read.
        digest: computes ``messages_sha256`` (e.g. a
            :class:`~deerflow.convert.encoding.MessageDigester`, which hashes each shared message once).

    A checkpoint the reader fails on gets ``("error: <Type>: <message>", "")``,
    so a failure compares unequal to any real reading.
    """
    reader = langgraph_reader(saver)
    out: dict[tuple[str, str], Reading] = {}
    for ns, cid in keys:
        try:
            values = reader.get(config_for(thread_id, ns, cid)).values
            out[(ns, cid)] = (digest(list(values.get("messages") or [])), channels_sha256(values))
        except Exception as exc:  # noqa: BLE001 - a reader failure is a difference, reported
            out[(ns, cid)] = (f"error: {type(exc).__name__}: {exc}", "")
    return out


def langgraph_values(saver: Any, thread_id: str, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Any]:
    """``{(checkpoint_ns, checkpoint_id): messages}`` as LangGraph's reader reads them (the list, ``[]`` when the
    channel is empty), or the exception the reader raised there (a value that compares unequal to any list)."""
    reader = langgraph_reader(saver)
    out: dict[tuple[str, str], Any] = {}
    for ns, cid in keys:
        try:
            out[(ns, cid)] = list(reader.get(config_for(thread_id, ns, cid)).values.get("messages") or [])
        except Exception as exc:  # noqa: BLE001 - the caller reports the failure
            out[(ns, cid)] = exc
    return out


def replayed_channels() -> frozenset[str]:
    """The channels LangGraph's reader rebuilds from a checkpoint's ancestors when the checkpoint stores no value
    for them: those of the reading graph that are a ``DeltaChannel`` or a ``BinaryOperatorAggregate`` (LangGraph's
    ``_delta_channels_to_replay``, ``langgraph.pregel._checkpoint``). Every other channel is read from the
    checkpoint's own rows. A checkpoint storing a value for each of these that it has a version of reads only
    its own rows."""
    from langgraph.channels.binop import BinaryOperatorAggregate
    from langgraph.channels.delta import DeltaChannel

    graph = _reading_graph(resolve_checkpoint_snapshot_frequency())
    return frozenset(name for name, spec in graph.channels.items()
                     if isinstance(spec, (DeltaChannel, BinaryOperatorAggregate)))
