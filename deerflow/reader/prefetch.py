"""Hand LangGraph's ``get_state`` a checkpoint tuple the caller already fetched, instead of fetching it again.

A page that gates before it materializes reads the addressed checkpoint
first (to resolve the head, check the lineage, list pending nodes) and then
asks LangGraph to materialize the same checkpoint, which fetches it -- and in
full mode its whole ``messages`` blob -- a second time. :func:`reuse_tuple`
returns a config whose ``__pregel_checkpointer`` (the key LangGraph's own
subgraphs use to lend a saver) is a :class:`PrefetchedSaver`: its
``get_tuple`` answers the one prefetched ``(thread_id, checkpoint_ns,
checkpoint_id)`` from memory and delegates everything else (delta history,
other checkpoints) to the real saver, so the snapshot is exactly what the
real saver would produce.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from deerflow._langgraph_compat import CONFIG_KEY_CHECKPOINTER

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = ["PrefetchedSaver", "reuse_tuple"]


def _key(config: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    c = config.get("configurable") or {}
    return str(c.get("thread_id")), c.get("checkpoint_ns", "") or "", c.get("checkpoint_id")


class PrefetchedSaver(BaseCheckpointSaver[Any]):
    """A saver that serves one already-fetched tuple and delegates the rest to ``saver``.

    Args:
        saver: the real LangGraph saver the tuple came from.
        tup: a ``CheckpointTuple`` ``saver.get_tuple`` returned, with its ``checkpoint_id`` resolved.
    """

    def __init__(self, saver: BaseCheckpointSaver[Any], tup: CheckpointTuple):
        super().__init__(serde=saver.serde)
        self.saver = saver
        self.tup = tup
        self.key = _key(tup.config)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The prefetched tuple for its own address, else the real saver's answer."""
        return self.tup if _key(config) == self.key else self.saver.get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple`."""
        return self.tup if _key(config) == self.key else await self.saver.aget_tuple(config)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        """The real saver's ``list``."""
        return self.saver.list(config, **kwargs)

    def alist(self, config: RunnableConfig | None, **kwargs: Any) -> AsyncIterator[CheckpointTuple]:
        """The real saver's ``alist``."""
        return self.saver.alist(config, **kwargs)

    def get_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        """The real saver's delta history (what ``get_state`` replays)."""
        return self.saver.get_delta_channel_history(*args, **kwargs)

    async def aget_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        """Async twin of :meth:`get_delta_channel_history`."""
        return await self.saver.aget_delta_channel_history(*args, **kwargs)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        """The real saver's version scheme."""
        return self.saver.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Any) -> BaseCheckpointSaver[Any]:
        """Strict-msgpack mode: the real saver's allowlisted clone (the prefetched tuple was decoded without it)."""
        return self.saver.with_allowlist(extra_allowlist)

    def put(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - reads only
        raise TypeError("PrefetchedSaver is for reads")

    def put_writes(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - reads only
        raise TypeError("PrefetchedSaver is for reads")


def reuse_tuple(config: Mapping[str, Any], saver: BaseCheckpointSaver[Any], tup: CheckpointTuple) -> dict[str, Any]:
    """A copy of ``config`` whose reads of ``tup``'s checkpoint are served from ``tup``.

    ``config`` must address ``tup`` (same thread, namespace and checkpoint id)
    for the reuse to happen; any other address is fetched normally.
    """
    out = dict(config)
    out["configurable"] = {**(config.get("configurable") or {}), CONFIG_KEY_CHECKPOINTER: PrefetchedSaver(saver, tup)}
    return out
