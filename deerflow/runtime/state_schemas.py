"""DeerFlow's thread state schemas for both checkpoint channel modes.

DeerFlow imports them from :mod:`deerflow.agents.thread_state`, which re-exports
this module. They live in the runtime because the runtime compiles them (the
state-mutation graph's default channel table) and they read the runtime's mode
freeze (the cadence a ``snapshot_frequency=None`` resolves to).

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
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired, get_type_hints

from langchain_core.messages import (
    AnyMessage,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_DELTA,
    DEFAULT_SNAPSHOT_FREQUENCY,
    resolve_checkpoint_snapshot_frequency,
)
from deerflow.runtime.message_writes import merge_message_writes
from deerflow.runtime.reducers import (
    merge_artifacts,
    merge_goal,
    merge_list_unique,
    merge_promoted,
    merge_sandbox,
    merge_todos,
    merge_viewed_images,
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
    new = TypedDict(name, hints)  # type: ignore[misc]
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


def _delta_channel_of(annotation: Any) -> DeltaChannel[Any] | None:
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
        if current is not None and current == DeltaChannel(
                merge_message_writes, snapshot_frequency=frequency):
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
    name = getattr(schema, "__name__", "")
    if schema in (ThreadState, DeltaThreadState) or name.startswith("DeltaThreadStateF"):
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
