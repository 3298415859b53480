"""The delta ``messages`` reducer :func:`merge_message_writes`, linear in the writes.

Its key law is batching invariance::

    merge_message_writes(merge_message_writes(s, xs), ys) == merge_message_writes(s, xs + ys)

and it equals folding LangGraph's ``add_messages`` over the writes one write at a time.
"""

from __future__ import annotations

import hashlib
import json
import operator
import uuid
from collections.abc import Container, Sequence
from typing import Any, cast

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

__all__ = ["merge_message_writes"]

_ID_NAMESPACE = uuid.UUID("6f3c1b8e-4a52-4d0e-9a7e-0d5f2c9b7e11")


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


_id_of = operator.attrgetter("id")


def _coerce(write: Any) -> list[BaseMessage]:
    items = write if isinstance(write, list) else [write]
    # per distinct type, not per message: a conversation holds thousands of messages of a few types.
    # The list itself is returned: nothing here mutates a write or the state (the log copies what it keeps).
    if all(issubclass(t, BaseMessage) and not issubclass(t, BaseMessageChunk) for t in set(map(type, items))):
        return items
    return [message_chunk_to_message(m) if isinstance(m, BaseMessageChunk) else m
            for m in convert_to_messages(items)]


def _null_write_error(accumulated: bool) -> ValueError:
    # Word for word what ``add_messages(left, None)`` raises: it names
    # ``left`` only when the accumulated list is non-empty.
    received = "left" if accumulated else "right"
    return ValueError(
        f"Must specify non-null arguments for both 'left' and 'right'. Only received: '{received}'."
    )


class _MessageLog:
    """A message list with tombstones and an id index: O(1) replace/remove per message.

    ``latest`` maps an id to the position ``add_messages`` would replace (the
    last occurrence); ``positions`` lists every occurrence of an id that
    occurs more than once, because a ``RemoveMessage`` removes all of them.
    Removed slots become ``None`` and are dropped once, in :meth:`result`.
    """

    def __init__(self, messages: list[BaseMessage]):
        self.items: list[BaseMessage | None] = []
        self.latest: dict[str, int] = {}
        self.positions: dict[str, list[int]] = {}
        self.live = 0
        self._extend(*self._with_ids(messages))

    def _with_ids(self, write: list[BaseMessage]) -> tuple[list[BaseMessage], list[str]]:
        """``(write with every id set, its ids)``; the write itself when it has them all."""
        ids = list(map(_id_of, write))
        if None not in ids:
            return write, ids
        taken: set[str] = set(self.latest)
        taken.update(i for i in ids if i is not None)
        out = []
        for offset, m in enumerate(write):
            if m.id is None:
                new_id = _deterministic_id(self.live + offset, m, taken)
                taken.add(new_id)
                m = m.model_copy(update={"id": new_id})
            out.append(m)
        return out, list(map(_id_of, out))

    def _extend(self, messages: list[BaseMessage], ids: list[str]) -> None:
        start = len(self.items)
        fresh = dict(zip(ids, range(start, start + len(ids)), strict=True))
        if len(fresh) == len(ids) and (not self.latest or self.latest.keys().isdisjoint(fresh)):
            # all new and distinct: in bulk
            self.items.extend(messages)
            if self.latest:
                self.latest.update(fresh)
            else:
                self.latest = fresh
            self.live += len(ids)
            return
        for m, mid in zip(messages, ids, strict=True):
            self._append(m, mid)

    def _append(self, message: BaseMessage, message_id: str) -> None:
        position = len(self.items)
        self.items.append(message)
        previous = self.latest.get(message_id)
        if previous is not None:
            self.positions.setdefault(message_id, [previous]).append(position)
        self.latest[message_id] = position
        self.live += 1

    def apply(self, write: list[BaseMessage]) -> None:
        """Apply one write with ``add_messages`` semantics."""
        write, ids = self._with_ids(write)
        for i in range(len(write) - 1, -1, -1):
            m = write[i]
            if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES:
                # add_messages returns the tail after the last REMOVE_ALL as-is.
                self.items, self.latest, self.positions, self.live = [], {}, {}, 0
                self._extend(write[i + 1:], ids[i + 1:])
                return
        to_remove: set[str] = set()
        for m, mid in zip(write, ids, strict=True):
            pos = self.latest.get(mid)
            if pos is not None:
                if isinstance(m, RemoveMessage):
                    to_remove.add(mid)
                else:
                    to_remove.discard(mid)
                    self.items[pos] = m
            elif isinstance(m, RemoveMessage):
                raise ValueError(
                    f"Attempting to delete a message with an ID that doesn't exist ('{mid}')"
                )
            else:
                self._append(m, mid)
        for mid in to_remove:
            last = self.latest.pop(mid)
            for pos in self.positions.pop(mid, None) or (last,):
                self.items[pos] = None
                self.live -= 1

    def result(self) -> list[BaseMessage]:
        if self.live == len(self.items):  # no tombstones: the log's own list (built here, shared with nobody)
            return cast("list[BaseMessage]", self.items)
        return [m for m in self.items if m is not None]


def merge_message_writes(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[AnyMessage]:
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
    # every item is a concrete message class: _coerce converts anything else (convert_to_messages)
    return cast("list[AnyMessage]", log.result())
