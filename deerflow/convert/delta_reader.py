"""LangGraph's own delta reader, as the converter and the compactor consult it.

:func:`delta_accessor` is the one place that builds a delta-mode
:class:`~deerflow.runtime.checkpoint_state.CheckpointStateAccessor` over a
saver (LangGraph's read path: ``get_tuple``, one batched
``get_delta_channel_history``, ``from_checkpoint`` + ``replay_writes``);
:func:`read_digest` reads one checkpoint's ``messages`` digest through it. The
integrity checks (:mod:`deerflow.convert.integrity`) read a sample of
checkpoints this way and the rest by LangGraph's read rule
(:mod:`deerflow.convert.langgraph_rule`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from deerflow.convert.digest import messages_sha256
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.addressing import config_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["delta_accessor", "read_digest"]


def delta_accessor(saver: BaseCheckpointSaver[Any]) -> CheckpointStateAccessor:
    """A delta-mode accessor over ``saver`` (any sync LangGraph saver); reading does not depend on the cadence."""
    return CheckpointStateAccessor.for_saver(saver, mode="delta")


def read_digest(accessor: CheckpointStateAccessor, thread_id: str, ns: str, checkpoint_id: str,
                digest: Callable[[list[Any]], str] = messages_sha256) -> tuple[str | None, str | None]:
    """``(messages_sha256, None)`` of one checkpoint read through ``accessor``, or ``(None, error)``.

    ``digest`` computes :func:`~deerflow.convert.digest.messages_sha256` (e.g. a caching
    :class:`~deerflow.convert.encoding.MessageDigester`). A reader that raises is
    reported, not propagated: ``error`` is ``"<Type>: <message>"``.
    """
    try:
        snapshot = accessor.get(config_for(thread_id, ns, checkpoint_id))
        return digest(snapshot.values.get("messages") or []), None
    except Exception as exc:  # noqa: BLE001 - a reader failure is a difference, reported by the caller
        return None, f"{type(exc).__name__}: {exc}"
