"""DeerFlow's thread state schemas for both checkpoint channel modes.

Spec section "State schemas". In full mode ``messages`` is a
``BinaryOperatorAggregate`` over ``add_messages`` (the whole list is stored in
every checkpoint). In delta mode it is LangGraph's ``DeltaChannel`` over
:func:`merge_message_writes`, whose key law is batching invariance::

    merge_message_writes(merge_message_writes(s, xs), ys) == merge_message_writes(s, xs + ys)

and which equals folding ``add_messages`` over the writes one write at a time.

Reducer channels (``THREAD_STATE_REDUCER_FIELDS``) default to an empty value
and are what a replace-style write must wrap in ``Overwrite``; every other
channel is a ``LastValue`` that is absent until written.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, get_type_hints

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from typing_extensions import NotRequired, TypedDict

from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_DELTA,
    DEFAULT_SNAPSHOT_FREQUENCY,
    resolve_checkpoint_snapshot_frequency,
)

__all__ = [
    "DELTA_MESSAGES_FIELD",
    "DeltaThreadState",
    "THREAD_STATE_REDUCER_FIELDS",
    "ThreadState",
    "adapt_state_schema_for_mode",
    "delta_messages_field",
    "get_thread_state_schema",
    "merge_artifacts",
    "merge_list_unique",
    "merge_message_writes",
    "merge_viewed_images",
    "normalize_middleware_state_schemas",
]

_ID_NAMESPACE = uuid.UUID("6f3c1b8e-4a52-4d0e-9a7e-0d5f2c9b7e11")


def merge_artifacts(existing: list[str] | None, new: list[str] | None) -> list[str]:
    """Reducer for ``artifacts``: append paths, keep first occurrence order, no duplicates."""
    return list(dict.fromkeys([*(existing or []), *(new or [])]))


def merge_list_unique(existing: list[Any] | None, new: list[Any] | None) -> list[Any]:
    """Reducer for ``delegations`` and ``skill_context``: append items not already present."""
    out = list(existing or [])
    for item in new or []:
        if item not in out:
            out.append(item)
    return out


def merge_viewed_images(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for ``viewed_images``: merge by path; an empty dict write clears the channel."""
    if new is not None and len(new) == 0:
        return {}
    return {**(existing or {}), **(new or {})}


def _content_key(message: BaseMessage) -> str:
    try:
        return json.dumps(message.content, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(message.content)


def _deterministic_id(position: int, message: BaseMessage) -> str:
    # add_messages gives id-less messages a random uuid4, so a replayed delta
    # channel would re-id them on every read; a stable id keeps RemoveMessage
    # and conversion consistent across materializations.
    digest = hashlib.sha256(_content_key(message).encode("utf-8")).hexdigest()
    return str(uuid.uuid5(_ID_NAMESPACE, f"{position}:{message.type}:{digest}"))


def _coerce(write: Any) -> list[BaseMessage]:
    items = write if isinstance(write, list) else [write]
    if all(isinstance(m, BaseMessage) and not isinstance(m, BaseMessageChunk) for m in items):
        return list(items)
    return [message_chunk_to_message(m) if isinstance(m, BaseMessageChunk) else m
            for m in convert_to_messages(items)]


class _MessageLog:
    """A message list with an id index and tombstones: O(1) replace/remove."""

    def __init__(self, messages: Iterable[BaseMessage]):
        self.items: list[BaseMessage | None] = []
        self.index: dict[str, int] = {}
        for message in messages:
            self.append(message)

    def append(self, message: BaseMessage) -> None:
        if message.id is None:
            message = message.model_copy(update={"id": _deterministic_id(len(self.items), message)})
        self.index[message.id] = len(self.items)
        self.items.append(message)

    def reset(self, messages: list[BaseMessage]) -> None:
        self.items = []
        self.index = {}
        for message in messages:
            self.append(message)

    def apply(self, write: list[BaseMessage]) -> None:
        """Apply one write with ``add_messages`` semantics."""
        base = len(self.items)
        write = [
            m if m.id is not None else m.model_copy(update={"id": _deterministic_id(base + i, m)})
            for i, m in enumerate(write)
        ]
        for i in range(len(write) - 1, -1, -1):
            m = write[i]
            if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES:
                self.items, self.index = [], {}
                for rest in write[i + 1:]:
                    self.index[rest.id] = len(self.items)
                    self.items.append(rest)
                return
        to_remove: set[str] = set()
        for m in write:
            pos = self.index.get(m.id)
            if pos is not None:
                if isinstance(m, RemoveMessage):
                    to_remove.add(m.id)
                else:
                    to_remove.discard(m.id)
                    self.items[pos] = m
            elif isinstance(m, RemoveMessage):
                raise ValueError(
                    f"Attempting to delete a message with an ID that doesn't exist ('{m.id}')"
                )
            else:
                self.index[m.id] = len(self.items)
                self.items.append(m)
        for mid in to_remove:
            self.items[self.index.pop(mid)] = None
        if to_remove:
            self._compact()

    def _compact(self) -> None:
        live = [m for m in self.items if m is not None]
        self.items = live
        self.index = {m.id: i for i, m in enumerate(live)}

    def result(self) -> list[BaseMessage]:
        return [m for m in self.items if m is not None]


def merge_message_writes(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """The linear-time ``add_messages``-equivalent reducer for the delta ``messages`` channel.

    Args:
        state: the accumulated message list (messages or message-likes), or ``None``.
        writes: a batch of writes, oldest first; each write is a list of
            message-likes or a single message-like, exactly what a node
            returned for ``messages``. A ``None`` write is a no-op.

    Returns:
        A new list; neither ``state`` nor any write is mutated. Equal to
        ``functools.reduce(add_messages, writes, state)`` except that id-less
        messages get a deterministic id (position and content) instead of a
        random one, so every materialization assigns the same id.

    Raises:
        ValueError: a ``RemoveMessage`` names an id that is not present, as
            ``add_messages`` does.

    Cost: O(len(state) + total messages written) plus one compaction per
    write that removes messages.
    """
    log = _MessageLog(_coerce(list(state)) if state else [])
    for write in writes:
        if write is None:
            continue
        log.apply(_coerce(write))
    return log.result()


def delta_messages_field(snapshot_frequency: int | None = None) -> Any:
    """``Annotated[list[AnyMessage], DeltaChannel(merge_message_writes, snapshot_frequency=K)]``.

    ``K`` is resolved by :func:`resolve_checkpoint_snapshot_frequency`
    (explicit, else frozen, else 10).
    """
    frequency = resolve_checkpoint_snapshot_frequency(snapshot_frequency)
    return Annotated[list[AnyMessage], DeltaChannel(merge_message_writes, snapshot_frequency=frequency)]


#: The delta ``messages`` field at DeerFlow's default cadence (10).
DELTA_MESSAGES_FIELD = delta_messages_field(DEFAULT_SNAPSHOT_FREQUENCY)


class ThreadState(TypedDict):
    """The full-mode thread state: ``messages`` stored whole in every checkpoint."""

    messages: Annotated[list[AnyMessage], add_messages]
    sandbox: NotRequired[dict[str, Any] | None]
    thread_data: NotRequired[dict[str, Any] | None]
    title: NotRequired[str | None]
    artifacts: Annotated[list[str], merge_artifacts]
    todos: NotRequired[list[Any] | None]
    goal: NotRequired[dict[str, Any] | None]
    uploaded_files: NotRequired[list[dict[str, Any]] | None]
    viewed_images: Annotated[dict[str, Any], merge_viewed_images]
    promoted: NotRequired[list[Any] | None]
    delegations: Annotated[list[Any], merge_list_unique]
    skill_context: Annotated[list[Any], merge_list_unique]
    summary_text: NotRequired[str | None]
    background_tasks: NotRequired[list[Any] | None]


#: Channels with a reducer; a replace-style write wraps these in ``Overwrite``.
THREAD_STATE_REDUCER_FIELDS: frozenset[str] = frozenset(
    {"messages", "artifacts", "viewed_images", "delegations", "skill_context"}
)


def _with_messages_field(schema: type, name: str, field: Any) -> type:
    hints = get_type_hints(schema, include_extras=True)
    hints["messages"] = field
    new = TypedDict(name, hints)  # type: ignore[operator]
    new.__doc__ = schema.__doc__
    return new


DeltaThreadState = _with_messages_field(ThreadState, "DeltaThreadState", DELTA_MESSAGES_FIELD)
DeltaThreadState.__doc__ = (
    "The delta-mode thread state at the default cadence: ``messages`` is a "
    "``DeltaChannel(merge_message_writes, snapshot_frequency=10)``."
)


@functools.lru_cache(maxsize=None)
def _delta_schema_for(frequency: int) -> type:
    if frequency == DEFAULT_SNAPSHOT_FREQUENCY:
        return DeltaThreadState
    return _with_messages_field(
        ThreadState, f"DeltaThreadStateF{frequency}", delta_messages_field(frequency)
    )


def get_thread_state_schema(mode: str, snapshot_frequency: int | None = None) -> type:
    """The compiled state schema for ``mode``.

    Returns ``ThreadState`` for any non-delta mode. In delta mode returns
    ``DeltaThreadState`` at the default cadence and a cached cadence-specific
    schema otherwise (the same object on every call for one cadence).

    Raises:
        ValueError: an explicit cadence that is not an integer >= 1.
    """
    if mode != CHECKPOINT_MODE_DELTA:
        return ThreadState
    return _delta_schema_for(resolve_checkpoint_snapshot_frequency(snapshot_frequency))


@functools.lru_cache(maxsize=256)
def _adapted(schema: type, mode: str, frequency: int) -> type:
    hints = get_type_hints(schema, include_extras=True)
    if "messages" not in hints:
        return schema
    if mode == CHECKPOINT_MODE_DELTA:
        field = delta_messages_field(frequency)
    else:
        field = Annotated[list[AnyMessage], add_messages]
    return _with_messages_field(schema, f"{schema.__name__}__{mode}", field)


def adapt_state_schema_for_mode(schema: type, mode: str, snapshot_frequency: int | None = None) -> type:
    """Adapt a (middleware) state schema so its ``messages`` channel matches ``mode``.

    A schema without ``messages`` is returned unchanged. The thread schemas
    themselves map to :func:`get_thread_state_schema`. Results are cached.
    """
    if schema in (ThreadState, DeltaThreadState) or getattr(schema, "__name__", "").startswith("DeltaThreadStateF"):
        return get_thread_state_schema(mode, snapshot_frequency)
    return _adapted(schema, mode, resolve_checkpoint_snapshot_frequency(snapshot_frequency))


def normalize_middleware_state_schemas(
    middleware: Sequence[Any], mode: str, snapshot_frequency: int | None = None
) -> list[Any]:
    """Return ``middleware`` with each ``state_schema`` adapted to ``mode``.

    A middleware whose schema changes is replaced by a shallow copy carrying
    the adapted schema; the caller's objects are never modified. Middleware
    without a ``state_schema`` attribute (or ``None``) is passed through.
    """
    out = []
    for item in middleware:
        schema = getattr(item, "state_schema", None)
        if schema is None:
            out.append(item)
            continue
        adapted = adapt_state_schema_for_mode(schema, mode, snapshot_frequency)
        if adapted is schema:
            out.append(item)
            continue
        clone = copy.copy(item)
        clone.state_schema = adapted
        out.append(clone)
    return out
