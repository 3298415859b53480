"""``CheckpointStateAccessor``: the only sanctioned way to read or write thread state.

Spec sections "Storage shape and read path" and "The fail-closed gate": delta
checkpoints store no full ``channel_values`` (a raw saver read sees a
sentinel), so every consumer goes through this accessor. It materializes with
LangGraph's own read path (``get_state``: hydrate channels, fetch the delta
channels absent from ``channel_values`` in one batched
``get_delta_channel_history`` call, then ``from_checkpoint(seed)`` plus
``replay_writes``), gates each access by mode, and re-injects the mode marker
on a copy of every config it prepares.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata
from langgraph.types import StateSnapshot

from deerflow.errors import MISMATCH_MESSAGE, CheckpointModeMismatchError
from deerflow.runtime.checkpoint_mode import (
    aensure_checkpoint_mode_compatible,
    checkpoint_tuple_uses_delta,
    copy_config,
    ensure_checkpoint_mode_compatible,
    frozen_checkpoint_channel_mode,
    inject_checkpoint_mode,
    raise_if_checkpoint_tuple_incompatible,
    raise_if_snapshot_incompatible,
    resolve_checkpoint_snapshot_frequency,
    validate_checkpoint_mode,
)
from deerflow.runtime.mutation_graph import (
    build_state_mutation_graph,
    graph_reducer_channels,
    graph_state_schema,
    graph_writable_channels,
    overwrites_on_defaultless_channels,
    unwrap_first_writes,
)

__all__ = [
    "CheckpointStateAccessor",
    "DegradedFullModeReadAccessor",
    "build_state_mutation_graph",
    "graph_reducer_channels",
    "graph_state_schema",
    "graph_writable_channels",
]


def _thread_id(config: Mapping[str, Any]) -> str | None:
    value = (config.get("configurable") or {}).get("thread_id")
    return None if value is None else str(value)


def _paging(before: Mapping[str, Any] | None, filter: dict[str, Any] | None) -> dict[str, Any]:
    """The optional ``get_state_history`` keywords, only those given (a bare graph may take neither)."""
    out: dict[str, Any] = {}
    if before:
        out["before"] = dict(before)
    if filter:
        out["filter"] = filter
    return out


class CheckpointStateAccessor:
    """Mode-gated reads and writes of checkpointed thread state.

    Args:
        graph: a compiled LangGraph graph whose channel table matches ``mode``
            (see :meth:`bind` and :meth:`for_saver`).
        checkpointer: the saver the graph reads from; used directly only for
            metadata reads and the pre-write gate.
        mode: ``"full"`` or ``"delta"``; defaults to the frozen mode.

    Every public method takes a LangGraph ``RunnableConfig`` with
    ``configurable.thread_id`` (and optionally ``checkpoint_id``,
    ``checkpoint_ns``). The config is copied and the mode marker injected
    (:func:`inject_checkpoint_mode`); the caller's dicts are never mutated.
    """

    def __init__(self, graph: Any, checkpointer: BaseCheckpointSaver[Any], mode: str | None = None):
        mode = mode or frozen_checkpoint_channel_mode()
        if mode is None:
            raise ValueError("CheckpointStateAccessor needs a mode: pass mode= or freeze one first.")
        self.mode = validate_checkpoint_mode(mode)
        self.graph = graph
        self.checkpointer = checkpointer

    @classmethod
    def bind(
        cls,
        graph: Any,
        checkpointer: BaseCheckpointSaver[Any],
        *,
        store: Any | None = None,
        mode: str = "full",
    ) -> CheckpointStateAccessor:
        """DeerFlow's binder: attach ``checkpointer`` (and ``store``) to a compiled graph.

        Sets ``graph.checkpointer = checkpointer`` and, when ``store`` is
        given, ``graph.store = store`` (the graph object is changed in place,
        as DeerFlow's is), then returns an accessor over it.

        Args:
            graph: a compiled LangGraph graph whose channel table matches
                ``mode`` (e.g. :func:`build_state_mutation_graph`).
            checkpointer: the LangGraph saver the graph reads and writes.
            store: a LangGraph ``BaseStore`` for the graph; ``None`` leaves
                ``graph.store`` as it was.
            mode: ``"full"`` (DeerFlow's default) or ``"delta"``.

        Returns:
            A :class:`CheckpointStateAccessor` over ``graph``.

        Raises:
            ValueError: an unknown mode (the graph is not changed).
        """
        mode = validate_checkpoint_mode(mode)
        graph.checkpointer = checkpointer
        if store is not None:
            graph.store = store
        return cls(graph, checkpointer, mode=mode)

    @classmethod
    def for_saver(
        cls,
        checkpointer: BaseCheckpointSaver[Any],
        *,
        mode: str | None = None,
        snapshot_frequency: int | None = None,
        state_schema: type | None = None,
        as_node: str = "manual_state_update",
    ) -> CheckpointStateAccessor:
        """Build an accessor over ``checkpointer`` with its own state-mutation graph for ``mode``.

        Args:
            checkpointer: any LangGraph saver (memory, SQLite, Postgres; sync
                or async -- the async methods need an async-capable saver).
            mode: ``"full"`` or ``"delta"``; default the frozen mode.
            snapshot_frequency: delta cadence of the compiled ``messages``
                channel; default the frozen cadence, else 10. Reading does not
                depend on it (it is not stamped); writes snapshot at it.
            state_schema: channel table to compile; default the thread schema
                for ``mode`` (:func:`get_thread_state_schema`).
            as_node: the single node writes are attributed to.

        Returns:
            A :class:`CheckpointStateAccessor`.

        Raises:
            ValueError: no mode given and none frozen, an unknown mode, or a
                bad cadence.
        """
        mode = mode or frozen_checkpoint_channel_mode()
        if mode is None:
            raise ValueError("for_saver() needs a mode: pass mode= or freeze one first.")
        frequency = resolve_checkpoint_snapshot_frequency(snapshot_frequency)
        graph = build_state_mutation_graph(
            as_node, mode, state_schema, snapshot_frequency=frequency, checkpointer=checkpointer
        )
        return cls(graph, checkpointer, mode=mode)

    def prepare_config(self, config: Mapping[str, Any]) -> RunnableConfig:
        """A copy of ``config`` with the mode marker re-injected (spec, "Storage shape and read path").

        ``configurable`` and ``metadata`` are copied; the caller's dicts are
        never mutated. See :func:`inject_checkpoint_mode`.

        Raises:
            CheckpointModeReconfigurationError: the process is frozen and the
                caller supplied a different ``__deerflow_checkpoint_channel_mode``.
        """
        # A RunnableConfig by construction: a copy of the caller's config with one configurable key added.
        return cast(RunnableConfig, inject_checkpoint_mode(copy_config(config), self.mode))

    def _gate(self, snapshot: StateSnapshot, config: Mapping[str, Any]) -> StateSnapshot:
        try:
            raise_if_snapshot_incompatible(snapshot, self.mode)
        except CheckpointModeMismatchError as exc:
            exc.thread_id = exc.thread_id or _thread_id(config)
            raise
        return snapshot

    # -- materialized reads -------------------------------------------------
    def get(self, config: Mapping[str, Any]) -> StateSnapshot:
        """The materialized ``StateSnapshot`` at the addressed checkpoint (head if none).

        LangGraph's read path: one ``get_tuple``; delta channels absent from
        ``channel_values`` are rebuilt with one batched
        ``get_delta_channel_history`` call, ``from_checkpoint(seed)`` and
        ``replay_writes``. The gate then runs on the snapshot's metadata, with
        no extra round-trip (spec, "The fail-closed gate").

        Args:
            config: ``{"configurable": {"thread_id", ["checkpoint_ns"], ["checkpoint_id"]}}``.

        Returns:
            A ``StateSnapshot`` (``values`` is ``{}`` and ``metadata`` ``None``
            when nothing is stored there).

        Raises:
            CheckpointModeMismatchError: full mode and the checkpoint shows delta
                mode; nothing materialized is returned.
            CheckpointModeReconfigurationError: see :meth:`prepare_config`.
        """
        prepared = self.prepare_config(config)
        return self._gate(self.graph.get_state(prepared), prepared)

    async def aget(self, config: Mapping[str, Any]) -> StateSnapshot:
        """Async twin of :meth:`get`."""
        prepared = self.prepare_config(config)
        return self._gate(await self.graph.aget_state(prepared), prepared)

    def history(
        self,
        config: Mapping[str, Any],
        *,
        limit: int | None = None,
        before: Mapping[str, Any] | None = None,
        filter: dict[str, Any] | None = None,
    ) -> list[StateSnapshot]:
        """Materialized snapshots newest first (``get_state_history`` order).

        Args:
            config: thread (and namespace) to list; a ``checkpoint_id`` is ignored
                by LangGraph's listing, use ``before`` to page.
            limit: at most this many; ``0`` (or less) returns ``[]`` without a
                saver call; ``None`` returns all.
            before: a snapshot's ``config``; list only older checkpoints.
            filter: metadata equality filter passed to the saver.

        Returns:
            ``list[StateSnapshot]``, exactly the checkpoints ``saver.list`` returns.

        Raises:
            CheckpointModeMismatchError: full mode and any listed checkpoint shows delta mode.
        """
        return list(self.iter_history(config, limit=limit, before=before, filter=filter))

    def iter_history(
        self,
        config: Mapping[str, Any],
        *,
        limit: int | None = None,
        before: Mapping[str, Any] | None = None,
        filter: dict[str, Any] | None = None,
    ) -> Iterator[StateSnapshot]:
        """Lazy form of :meth:`history`: each snapshot is gated as it is produced."""
        if limit is not None and limit <= 0:
            return
        prepared = self.prepare_config(config)
        produced = 0
        for snapshot in self.graph.get_state_history(prepared, limit=limit, **_paging(before, filter)):
            yield self._gate(snapshot, prepared)
            produced += 1
            if limit is not None and produced >= limit:
                return

    async def ahistory(
        self,
        config: Mapping[str, Any],
        *,
        limit: int | None = None,
        before: Mapping[str, Any] | None = None,
        filter: dict[str, Any] | None = None,
    ) -> list[StateSnapshot]:
        """Async twin of :meth:`history`."""
        return [s async for s in self.aiter_history(config, limit=limit, before=before, filter=filter)]

    async def aiter_history(
        self,
        config: Mapping[str, Any],
        *,
        limit: int | None = None,
        before: Mapping[str, Any] | None = None,
        filter: dict[str, Any] | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of :meth:`iter_history`."""
        if limit is not None and limit <= 0:
            return
        prepared = self.prepare_config(config)
        produced = 0
        async for snapshot in self.graph.aget_state_history(prepared, limit=limit, **_paging(before, filter)):
            yield self._gate(snapshot, prepared)
            produced += 1
            if limit is not None and produced >= limit:
                return

    # -- metadata-only reads ------------------------------------------------
    def get_metadata(self, config: Mapping[str, Any]) -> CheckpointMetadata | None:
        """The addressed checkpoint's metadata, gated, nothing materialized; ``None`` if absent.

        One ``get_tuple`` and :func:`raise_if_checkpoint_tuple_incompatible`
        (spec, "The fail-closed gate": metadata-only reads).

        Returns:
            The stored ``CheckpointMetadata`` dict, or ``None``.

        Raises:
            CheckpointModeMismatchError: full mode and the metadata shows delta mode.
        """
        prepared = self.prepare_config(config)
        checkpoint_tuple = self.checkpointer.get_tuple(prepared)
        raise_if_checkpoint_tuple_incompatible(checkpoint_tuple, self.mode)
        return None if checkpoint_tuple is None else checkpoint_tuple.metadata

    async def aget_metadata(self, config: Mapping[str, Any]) -> CheckpointMetadata | None:
        """Async twin of :meth:`get_metadata`."""
        prepared = self.prepare_config(config)
        checkpoint_tuple = await self.checkpointer.aget_tuple(prepared)
        raise_if_checkpoint_tuple_incompatible(checkpoint_tuple, self.mode)
        return None if checkpoint_tuple is None else checkpoint_tuple.metadata

    # -- writes -------------------------------------------------------------
    def update(
        self, config: Mapping[str, Any], values: dict[str, Any] | None, as_node: str | None = None
    ) -> dict[str, Any]:
        """Apply ``values`` with ``update_state`` after the pre-write gate.

        Args:
            config: addresses the checkpoint to write onto (the head when it
                names no ``checkpoint_id``; an older one forks).
            values: ``{channel: value}``; a replace-style write wraps reducer
                channels (``THREAD_STATE_REDUCER_FIELDS``) in ``Overwrite``.
                An ``Overwrite`` of a reducer channel the base checkpoint never
                wrote is applied as a plain value, because LangGraph would
                otherwise store the ``Overwrite`` object itself.
            as_node: the node the write is attributed to (e.g.
                ``"manual_state_update"``); must be a node of :attr:`graph`.

        Returns:
            The config of the new checkpoint.

        Raises:
            CheckpointModeMismatchError: before anything is written, in full
                mode, when the addressed checkpoint shows delta mode.
        """
        prepared = self.prepare_config(config)
        ensure_checkpoint_mode_compatible(self.checkpointer, prepared, self.mode)
        candidates = overwrites_on_defaultless_channels(self.graph, values)
        if candidates:
            head = self.checkpointer.get_tuple(prepared)
            values = unwrap_first_writes(dict(values or {}), candidates, head)
        return dict(self.graph.update_state(prepared, values, as_node=as_node))

    async def aupdate(
        self, config: Mapping[str, Any], values: dict[str, Any] | None, as_node: str | None = None
    ) -> dict[str, Any]:
        """Async twin of :meth:`update`."""
        prepared = self.prepare_config(config)
        await aensure_checkpoint_mode_compatible(self.checkpointer, prepared, self.mode)
        candidates = overwrites_on_defaultless_channels(self.graph, values)
        if candidates:
            head = await self.checkpointer.aget_tuple(prepared)
            values = unwrap_first_writes(dict(values or {}), candidates, head)
        return dict(await self.graph.aupdate_state(prepared, values, as_node=as_node))


class DegradedFullModeReadAccessor:
    """Raw full-mode reads for when the agent graph cannot be built.

    Reads ``channel_values`` straight from the saver (no materialization), so
    it is only correct for full-mode checkpoints; it refuses delta evidence
    with the same :data:`MISMATCH_MESSAGE` so the operator sees the same
    remediation even with a broken agent factory (spec, "The fail-closed gate").
    """

    def __init__(self, checkpointer: BaseCheckpointSaver[Any]):
        self.checkpointer = checkpointer

    def get_values(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        """The stored ``channel_values`` of the addressed checkpoint, or ``None`` if absent.

        Raises:
            CheckpointModeMismatchError: the checkpoint shows delta mode.
        """
        checkpoint_tuple = self.checkpointer.get_tuple(cast(RunnableConfig, dict(config)))
        if checkpoint_tuple is None:
            return None
        if checkpoint_tuple_uses_delta(checkpoint_tuple):
            raise CheckpointModeMismatchError(MISMATCH_MESSAGE, thread_id=_thread_id(config))
        return dict(checkpoint_tuple.checkpoint["channel_values"])

