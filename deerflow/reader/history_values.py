"""A checkpoint's ``messages`` value derived from its parent's, for a history page read newest first.

A history page shows, per checkpoint, how many messages a reader sees there.
Reading each row with LangGraph's ``get_state`` replays the delta history
from the last snapshot once per row; along a page the rows are each other's
parents, so each value follows from the one below it by LangGraph's own read
rule for ``DeltaChannel`` (the rule :mod:`deerflow.convert.onepass` applies
and the conversion's integrity check compares with LangGraph's reader)::

    value(c) = seed(c)                                     if c stores a value
    value(c) = replay(value(parent(c)), writes_at(parent(c)))   otherwise

In full mode a reader replays nothing: ``value(c)`` is the stored list (``[]``
when absent). :func:`derive_messages` answers only the plain cases and
``None`` for everything else (a stored ``None`` or ``Overwrite`` wrapper, a
non-list value, writes of several tasks whose order the saver may not keep,
a write the reducer refuses), and the caller then reads that row with
LangGraph's reader as before: no value is ever guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert.onepass import replay

if TYPE_CHECKING:
    from langgraph.checkpoint.base import CheckpointTuple

__all__ = ["MESSAGES", "derive_messages"]

MESSAGES = "messages"


def _stored(tup: CheckpointTuple) -> tuple[bool, Any]:
    """``(present, value)`` of the tuple's stored ``messages`` channel value."""
    values = (tup.checkpoint or {}).get("channel_values") or {}
    return (MESSAGES in values, values.get(MESSAGES))


def derive_messages(tup: CheckpointTuple, parent_tup: CheckpointTuple | None, parent_value: list[Any] | None, *,
                    delta: bool) -> list[Any] | None:
    """The ``messages`` list a LangGraph reader materializes at ``tup``, when it follows plainly; else ``None``.

    Args:
        tup: the checkpoint's ``CheckpointTuple`` as ``saver.list`` returned it (``channel_values``
            and ``pending_writes`` loaded).
        parent_tup: the tuple of ``tup``'s parent (``parent_config``'s checkpoint), or ``None`` when
            the caller has not read it.
        parent_value: the messages materialized at the parent (``None``: unknown).
        delta: the reading process is in delta mode (``DeltaChannel``: replay from the parent);
            false for full mode (the stored value alone).

    Returns:
        The message list (a new list; the caller may keep it as the next row's ``parent_value``),
        or ``None`` when this row must be read with LangGraph's reader (the cases in the module
        docstring). Never raises for stored data: a refused write answers ``None``.
    """
    present, stored = _stored(tup)
    if not delta:
        if not present:
            return []
        return list(stored) if isinstance(stored, list) else None
    if present:
        if isinstance(stored, _DeltaSnapshot):
            stored = stored.value
            if stored is None:  # DeltaChannel folds onto None as onto []
                return []
        return list(stored) if isinstance(stored, list) else None  # None / Overwrite / other: the reader decides
    if parent_tup is None or parent_value is None:
        return None
    if tup.parent_config is None or (parent_tup.config["configurable"]["checkpoint_id"]
                                     != tup.parent_config["configurable"].get("checkpoint_id")):
        return None
    parent_present, parent_stored = _stored(parent_tup)
    if parent_present and parent_stored is None:
        # LangGraph's reader reads a stored None at the parent itself as [], but a walk from the child treats it
        # by the saver's ancestor rule (PostgresSaver walks past it, the base and SQLite readers restart there)
        return None
    writes = [(task, value) for task, channel, value in (parent_tup.pending_writes or []) if channel == MESSAGES]
    if len({task for task, _value in writes}) > 1:
        return None  # several tasks: their replay order is the saver's, which a list() may not keep
    try:
        return list(replay(list(parent_value), [value for _task, value in writes]))
    except Exception:  # noqa: BLE001 - a refused write: the reader reports it (reducer_error)
        return None
