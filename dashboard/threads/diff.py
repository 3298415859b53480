"""What changed between two materialized checkpoints of a thread: messages by id, channels by value.

Messages are matched by ``id`` and compared in the fixture manifest's
canonical form (:func:`deerflow.convert.digest.canonical_messages`: type, id, name,
content, tool_call_id, tool calls). A message present only in the target is
*added*, only in the base *removed*, in both with a different canonical form
*changed*. A message without an id is matched by position. Channels other
than ``messages`` are compared as JSON values (:func:`jsonable`).

So ``diff(a, b).added`` are exactly the messages a reader of ``b`` sees that
a reader of ``a`` did not, whatever the branch structure between them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dashboard.threads.jsonify import jsonable
from dashboard.threads.messages import MessageItem, message_item
from deerflow.convert import canonical_messages

__all__ = ["ChannelChange", "StateDiff", "diff_values"]

#: Characters of a channel's JSON shown on each side of a change.
VALUE_CHARS = 4000


@dataclass(frozen=True)
class ChannelChange:
    """A channel whose value differs: ``kind`` is ``added``, ``removed`` or ``changed``; values as JSON text."""

    name: str
    kind: str
    before: str
    after: str


@dataclass
class StateDiff:
    """The difference from a base checkpoint to a target checkpoint.

    Attributes:
        added, removed: messages only in the target / only in the base (target / base positions).
        changed: ``(base item, target item)`` pairs of messages with the same id and other content.
        unchanged: count of messages equal in both.
        channels: channels added, removed or changed.
    """

    added: list[MessageItem] = field(default_factory=list)
    removed: list[MessageItem] = field(default_factory=list)
    changed: list[tuple[MessageItem, MessageItem]] = field(default_factory=list)
    unchanged: int = 0
    channels: list[ChannelChange] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.channels)


def _keyed(messages: list[Any]) -> dict[str, tuple[int, Any, dict]]:
    canon = canonical_messages(messages)
    return {(m.id if getattr(m, "id", None) else f"#position-{i}"): (i, m, c)
            for i, (m, c) in enumerate(zip(messages, canon, strict=True))}


def _json_text(value: Any) -> str:
    text = json.dumps(jsonable(value), indent=2, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + f"\n… {len(text) - VALUE_CHARS:,} more characters"


def diff_values(base: dict[str, Any], target: dict[str, Any]) -> StateDiff:
    """The :class:`StateDiff` from materialized values ``base`` to ``target`` (``values["messages"]`` lists)."""
    out = StateDiff()
    before, after = _keyed(base.get("messages") or []), _keyed(target.get("messages") or [])
    for key, (i, message, canon) in after.items():
        if key not in before:
            out.added.append(message_item(i, message))
        elif before[key][2] != canon:
            out.changed.append((message_item(before[key][0], before[key][1]), message_item(i, message)))
        else:
            out.unchanged += 1
    out.removed = [message_item(i, m) for key, (i, m, _c) in before.items() if key not in after]
    for name in sorted((set(base) | set(target)) - {"messages"}):
        if name not in target:
            out.channels.append(ChannelChange(name, "removed", _json_text(base[name]), ""))
        elif name not in base:
            out.channels.append(ChannelChange(name, "added", "", _json_text(target[name])))
        elif jsonable(base[name]) != jsonable(target[name]):
            out.channels.append(ChannelChange(name, "changed", _json_text(base[name]), _json_text(target[name])))
    return out
