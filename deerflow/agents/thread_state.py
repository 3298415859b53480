"""DeerFlow's thread state schemas for both checkpoint channel modes.

Spec section "State schemas". In full mode ``messages`` is a
``BinaryOperatorAggregate`` over ``add_messages`` (the whole list is stored in
every checkpoint). In delta mode it is LangGraph's ``DeltaChannel`` over
:func:`merge_message_writes`, whose key law is batching invariance::

    merge_message_writes(merge_message_writes(s, xs), ys) == merge_message_writes(s, xs + ys)

and which equals folding ``add_messages`` over the writes one write at a time.

Reducer channels (``THREAD_STATE_REDUCER_FIELDS``, DeerFlow's set) are what a
replace-style write must wrap in ``Overwrite``; the list and dict ones
(``messages``, ``artifacts``, ``viewed_images``, ``delegations``,
``skill_context``) default to an empty value, the optional ones (``sandbox``,
``todos``, ``goal``, ``promoted``) are absent until written. Every other
channel is a ``LastValue`` that is absent until written.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import uuid
from collections.abc import Container, Sequence
from typing import Annotated, Any, NotRequired, get_type_hints

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
from typing_extensions import TypedDict

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
    "merge_goal",
    "merge_list_unique",
    "merge_message_writes",
    "merge_promoted",
    "merge_sandbox",
    "merge_todos",
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


def merge_sandbox(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """Reducer for ``sandbox`` (``{"sandbox_id": ...}``): idempotent writes only.

    Returns ``existing`` for a ``None`` write or the same ``sandbox_id``, and
    ``new`` when nothing was set yet.

    Raises:
        ValueError: two different sandbox ids for one thread.
    """
    if new is None:
        return existing
    if existing is None:
        return new
    if existing.get("sandbox_id") == new.get("sandbox_id"):
        return existing
    raise ValueError(
        f"Conflicting sandbox state updates: {existing.get('sandbox_id')!r} != {new.get('sandbox_id')!r}"
    )


def merge_todos(existing: list[Any] | None, new: list[Any] | None) -> list[Any] | None:
    """Reducer for ``todos``: the last non-``None`` write wins (``[]`` is an explicit clear)."""
    return existing if new is None else new


def merge_goal(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """Reducer for ``goal``: the last non-``None`` write wins."""
    return existing if new is None else new


def merge_promoted(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """Reducer for ``promoted`` (``{"catalog_hash": str, "names": [str]}``).

    An empty or ``None`` write keeps ``existing``; a write for another
    ``catalog_hash`` replaces the value; the same hash unions ``names``
    (first occurrence order, no duplicates).
    """
    if not new:
        return existing
    if existing is None or existing.get("catalog_hash") != new.get("catalog_hash"):
        names = new.get("names") or []
    else:
        names = [*(existing.get("names") or []), *(new.get("names") or [])]
    return {"catalog_hash": new.get("catalog_hash"), "names": list(dict.fromkeys(names))}


def _content_key(message: BaseMessage) -> str:
    try:
        return json.dumps(message.content, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(message.content)


def _deterministic_id(position: int, message: BaseMessage, taken: Container[str]) -> str:
    """A stable id for an id-less message that collides with no id in ``taken``.

    ``add_messages`` gives id-less messages a random uuid4, so a replayed
    delta channel would re-id them on every read; a stable id keeps
    ``RemoveMessage`` and conversion consistent across materializations. The
    id depends only on the live position, the type and the content, and is
    re-salted while it collides with an id already present (a random uuid4
    never collides in practice, so neither may this one).
    """
    digest = hashlib.sha256(_content_key(message).encode("utf-8")).hexdigest()
    salt = 0
    while True:
        candidate = str(uuid.uuid5(_ID_NAMESPACE, f"{position}:{message.type}:{digest}:{salt}"))
        if candidate not in taken:
            return candidate
        salt += 1


def _coerce(write: Any) -> list[BaseMessage]:
    items = write if isinstance(write, list) else [write]
    if all(isinstance(m, BaseMessage) and not isinstance(m, BaseMessageChunk) for m in items):
        return list(items)
    return [message_chunk_to_message(m) if isinstance(m, BaseMessageChunk) else m
            for m in convert_to_messages(items)]


def _null_write_error(accumulated: bool) -> ValueError:
    # Word for word what ``add_messages(left, None)`` raises: it names
    # ``left`` only when the accumulated list is non-empty.
    received = "left" if accumulated else "right"
    return ValueError(
        f"Must specify non-null arguments for both 'left' and 'right'. Only received: '{received}'."
    )


def _id(message: BaseMessage) -> str:
    """The id of a message that went through ``_MessageLog._with_ids`` (every such message has one)."""
    assert message.id is not None, "message ids are filled in by _with_ids first"
    return message.id


class _MessageLog:
    """A message list with tombstones and an id index: O(1) replace/remove per message.

    ``latest`` maps an id to the position ``add_messages`` would replace (the
    last occurrence); ``positions`` lists every occurrence, because a
    ``RemoveMessage`` removes all of them. Removed slots become ``None`` and
    are dropped once, in :meth:`result`.
    """

    def __init__(self, messages: list[BaseMessage]):
        self.items: list[BaseMessage | None] = []
        self.latest: dict[str, int] = {}
        self.positions: dict[str, list[int]] = {}
        self.live = 0
        self._extend(self._with_ids(messages))

    def _with_ids(self, write: list[BaseMessage]) -> list[BaseMessage]:
        if all(m.id is not None for m in write):
            return write
        taken: set[str] = set(self.latest)
        taken.update(m.id for m in write if m.id is not None)
        out = []
        for offset, m in enumerate(write):
            if m.id is None:
                new_id = _deterministic_id(self.live + offset, m, taken)
                taken.add(new_id)
                m = m.model_copy(update={"id": new_id})
            out.append(m)
        return out

    def _extend(self, messages: list[BaseMessage]) -> None:
        for m in messages:
            self._append(m)

    def _append(self, message: BaseMessage) -> None:
        position = len(self.items)
        self.items.append(message)
        mid = _id(message)
        self.latest[mid] = position
        self.positions.setdefault(mid, []).append(position)
        self.live += 1

    def apply(self, write: list[BaseMessage]) -> None:
        """Apply one write with ``add_messages`` semantics."""
        write = self._with_ids(write)
        for i in range(len(write) - 1, -1, -1):
            m = write[i]
            if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES:
                # add_messages returns the tail after the last REMOVE_ALL as-is.
                self.items, self.latest, self.positions, self.live = [], {}, {}, 0
                self._extend(write[i + 1:])
                return
        to_remove: set[str] = set()
        for m in write:
            pos = self.latest.get(_id(m))
            if pos is not None:
                if isinstance(m, RemoveMessage):
                    to_remove.add(_id(m))
                else:
                    to_remove.discard(_id(m))
                    self.items[pos] = m
            elif isinstance(m, RemoveMessage):
                raise ValueError(
                    f"Attempting to delete a message with an ID that doesn't exist ('{m.id}')"
                )
            else:
                self._append(m)
        for mid in to_remove:
            del self.latest[mid]
            for pos in self.positions.pop(mid):
                self.items[pos] = None
                self.live -= 1

    def result(self) -> list[BaseMessage]:
        return [m for m in self.items if m is not None]


def merge_message_writes(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[BaseMessage]:
    """The linear-time ``add_messages``-equivalent reducer for the delta ``messages`` channel.

    Spec, "State schemas" (``merge_message_writes(state, writes)``). It is
    batching-invariant, as ``DeltaChannel`` requires::

        merge_message_writes(merge_message_writes(s, xs), ys) == merge_message_writes(s, xs + ys)

    Args:
        state: the accumulated message list (messages or message-likes); a
            single message-like is treated as a one-item list and ``None`` as
            the empty list.
        writes: a batch of writes, oldest first; each write is a list of
            message-likes or a single message-like, exactly what a node
            returned for ``messages``.

    Returns:
        A new list; neither ``state`` nor any write is mutated. Equal to
        ``functools.reduce(add_messages, writes, state)``: replace by id (the
        last occurrence), append new ids, ``RemoveMessage`` drops every
        occurrence of its id, ``RemoveMessage(REMOVE_ALL_MESSAGES)`` keeps
        only what follows the last one in its write. The one deliberate
        difference: an id-less message gets a deterministic id (live
        position, type and content; never one already present) instead of a
        random uuid4, so every materialization of a checkpoint assigns the
        same ids.

    Raises:
        ValueError: a ``RemoveMessage`` names an id that is not present, or a
            write is ``None`` -- both with ``add_messages``' own message.

    Cost: O(len(state) + total messages written); removals leave tombstones
    that are dropped in one final pass.
    """
    if state is None:
        initial: list[BaseMessage] = []
    elif isinstance(state, (list, BaseMessage, str, dict)):
        initial = _coerce(state)
    else:
        initial = _coerce(list(state))
    log = _MessageLog(initial)
    for write in writes:
        if write is None:
            raise _null_write_error(log.live > 0)
        log.apply(_coerce(write))
    return log.result()


def delta_messages_field(snapshot_frequency: int | None = None) -> Any:
    """``Annotated[list[AnyMessage], DeltaChannel(merge_message_writes, snapshot_frequency=K)]``.

    Spec, "State schemas" (``delta_messages_field``).

    Args:
        snapshot_frequency: ``K``, messages-channel updates per
            ``_DeltaSnapshot``; resolved by
            :func:`resolve_checkpoint_snapshot_frequency` (explicit, else
            frozen, else 10).

    Returns:
        An ``Annotated`` type for a ``messages`` field (a new ``DeltaChannel``
        each call; channels compare equal by reducer and cadence).

    Raises:
        ValueError: an explicit cadence that is not an integer >= 1.
    """
    frequency = resolve_checkpoint_snapshot_frequency(snapshot_frequency)
    return Annotated[list[AnyMessage], DeltaChannel(merge_message_writes, snapshot_frequency=frequency)]


#: The delta ``messages`` field at DeerFlow's default cadence (10).
DELTA_MESSAGES_FIELD = delta_messages_field(DEFAULT_SNAPSHOT_FREQUENCY)


class ThreadState(TypedDict):
    """The full-mode thread state: ``messages`` stored whole in every checkpoint."""

    messages: Annotated[list[AnyMessage], add_messages]
    sandbox: Annotated[dict[str, Any] | None, merge_sandbox]
    thread_data: NotRequired[dict[str, Any] | None]
    title: NotRequired[str | None]
    artifacts: Annotated[list[str], merge_artifacts]
    todos: Annotated[list[Any] | None, merge_todos]
    goal: Annotated[dict[str, Any] | None, merge_goal]
    uploaded_files: NotRequired[list[dict[str, Any]] | None]
    viewed_images: Annotated[dict[str, Any], merge_viewed_images]
    promoted: Annotated[dict[str, Any] | None, merge_promoted]
    delegations: Annotated[list[Any], merge_list_unique]
    skill_context: Annotated[list[Any], merge_list_unique]
    summary_text: NotRequired[str | None]
    background_tasks: NotRequired[list[Any] | None]


#: Channels with a reducer (DeerFlow's set); a replace-style write wraps these
#: in ``Overwrite``. Every other channel is a ``LastValue``.
THREAD_STATE_REDUCER_FIELDS: frozenset[str] = frozenset(
    {
        "messages",
        "sandbox",
        "artifacts",
        "todos",
        "goal",
        "viewed_images",
        "promoted",
        "delegations",
        "skill_context",
    }
)


def _with_messages_field(schema: type, name: str, field: Any) -> type:
    hints = get_type_hints(schema, include_extras=True)
    hints["messages"] = field
    new = TypedDict(name, hints)  # type: ignore[misc]  # built at run time: the name is not a literal
    new.__doc__ = schema.__doc__
    return new


DeltaThreadState = _with_messages_field(ThreadState, "DeltaThreadState", DELTA_MESSAGES_FIELD)
DeltaThreadState.__doc__ = (
    "The delta-mode thread state at the default cadence: ``messages`` is a "
    "``DeltaChannel(merge_message_writes, snapshot_frequency=10)``."
)


@functools.cache
def _delta_schema_for(frequency: int) -> type:
    if frequency == DEFAULT_SNAPSHOT_FREQUENCY:
        return DeltaThreadState
    return _with_messages_field(
        ThreadState, f"DeltaThreadStateF{frequency}", delta_messages_field(frequency)
    )


def get_thread_state_schema(mode: str, snapshot_frequency: int | None = None) -> type:
    """The compiled state schema for ``mode`` (spec, "State schemas").

    Args:
        mode: ``"delta"`` selects the delta schema; any other value is full.
        snapshot_frequency: delta cadence; explicit, else frozen, else 10.

    Returns:
        ``ThreadState`` for any non-delta mode. In delta mode
        ``DeltaThreadState`` itself at the default cadence, otherwise a cached
        cadence-specific ``TypedDict`` (the same object on every call for one
        cadence) whose ``messages`` is ``delta_messages_field(K)``.

    Raises:
        ValueError: an explicit cadence that is not an integer >= 1 (delta only).
    """
    if mode != CHECKPOINT_MODE_DELTA:
        return ThreadState
    return _delta_schema_for(resolve_checkpoint_snapshot_frequency(snapshot_frequency))


def _delta_channel_of(annotation: Any) -> DeltaChannel | None:
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, DeltaChannel):
            return meta
    return None


@functools.lru_cache(maxsize=256)
def _adapted(schema: type, mode: str, frequency: int) -> type:
    hints = get_type_hints(schema, include_extras=True)
    if "messages" not in hints:
        return schema
    current = _delta_channel_of(hints["messages"])
    if mode == CHECKPOINT_MODE_DELTA:
        if current is not None and current == DeltaChannel(merge_message_writes, snapshot_frequency=frequency):
            return schema
        field = delta_messages_field(frequency)
        name = f"{schema.__name__}__delta_f{frequency}"
    else:
        if current is None:
            return schema
        field = Annotated[list[AnyMessage], add_messages]
        name = f"{schema.__name__}__full"
    return _with_messages_field(schema, name, field)


def adapt_state_schema_for_mode(schema: type, mode: str, snapshot_frequency: int | None = None) -> type:
    """Adapt a (middleware) state schema so its ``messages`` channel matches ``mode``.

    Spec, "State schemas": middleware-contributed channels must compile
    against the same channel types as the thread schema, or LangGraph
    refuses the conflicting ``messages`` channel.

    Args:
        schema: a ``TypedDict`` state schema (e.g. a middleware's ``state_schema``).
        mode: ``"full"`` or ``"delta"`` (anything but ``"delta"`` is full).
        snapshot_frequency: delta cadence; explicit, else frozen, else 10.

    Returns:
        ``schema`` itself when it has no ``messages`` key or its ``messages``
        already matches (full: not a ``DeltaChannel``; delta: the
        ``merge_message_writes`` ``DeltaChannel`` at that cadence); the thread
        schema from :func:`get_thread_state_schema` for ``ThreadState`` /
        ``DeltaThreadState`` and their cadence variants; otherwise a cached
        copy whose ``messages`` field is the mode's field. ``schema`` is never
        modified.

    Raises:
        ValueError: an explicit cadence that is not an integer >= 1.
    """
    if schema in (ThreadState, DeltaThreadState) or getattr(schema, "__name__", "").startswith("DeltaThreadStateF"):
        return get_thread_state_schema(mode, snapshot_frequency)
    return _adapted(schema, mode, resolve_checkpoint_snapshot_frequency(snapshot_frequency))


def normalize_middleware_state_schemas(
    middleware: Sequence[Any], mode: str, snapshot_frequency: int | None = None
) -> list[Any]:
    """Return ``middleware`` with each ``state_schema`` adapted to ``mode``.

    Spec, "State schemas" (``normalize_middleware_state_schemas``).

    Args:
        middleware: objects that may carry a ``state_schema`` attribute.
        mode: ``"full"`` or ``"delta"``.
        snapshot_frequency: delta cadence; explicit, else frozen, else 10.

    Returns:
        A new list of the same length. A middleware whose schema changes
        (:func:`adapt_state_schema_for_mode`) is replaced by a shallow copy
        carrying the adapted schema; the caller's objects are never modified.
        Middleware without a ``state_schema`` (or ``None``), or whose schema
        already matches, is passed through as the same object.

    Raises:
        ValueError: an explicit cadence that is not an integer >= 1.
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
