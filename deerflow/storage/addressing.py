"""The address of a checkpoint as LangGraph's savers and graphs take it: a ``RunnableConfig``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = ["config_for"]


def config_for(thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    """``{"configurable": {thread_id, checkpoint_ns[, checkpoint_id]}}`` for a saver, accessor or graph call.

    Args:
        thread_id: the thread.
        checkpoint_ns: the namespace (``""``: the root graph).
        checkpoint_id: one checkpoint; ``None`` addresses the namespace's head (and, passed to ``put``,
            a checkpoint without a parent).

    Returns:
        A new ``RunnableConfig`` dict (callers may add keys to it).
    """
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}
