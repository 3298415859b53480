"""A checkpoint's pending writes, by task: what the tasks that ran from it wrote.

LangGraph stores the writes of the tasks of superstep ``n + 1`` against the
checkpoint of step ``n`` (``put_writes`` with the config the tasks started
from), so checkpoint ``C``'s pending writes are what was written *from*
``C``; the step that produced ``C`` wrote the pending writes of ``C``'s
parent. In delta mode these writes are the ``messages`` history itself: a
reader replays them from the last snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dashboard.runtime import DashboardRuntime
from dashboard.threads.jsonify import jsonable
from dashboard.threads.messages import MessageItem, message_item

__all__ = ["ChannelWrite", "TaskWrites", "pending_writes"]

#: Characters of a non-message value shown.
VALUE_CHARS = 2000


@dataclass
class ChannelWrite:
    """One write: the channel, its messages (for ``messages``) or its value as JSON text."""

    channel: str
    messages: list[MessageItem] = field(default_factory=list)
    value: str = ""


@dataclass
class TaskWrites:
    """A task's writes, in the order stored."""

    task_id: str
    writes: list[ChannelWrite]


def _write(channel: str, value: Any) -> ChannelWrite:
    values = value if isinstance(value, list) else [value]
    if channel == "messages" and values and all(hasattr(v, "type") and hasattr(v, "content") for v in values):
        return ChannelWrite(channel, messages=[message_item(i, m) for i, m in enumerate(values)])
    text = json.dumps(jsonable(value), indent=2, ensure_ascii=False, sort_keys=True)
    if len(text) > VALUE_CHARS:
        text = text[:VALUE_CHARS] + f"\n… {len(text) - VALUE_CHARS:,} more characters"
    return ChannelWrite(channel, value=text)


def pending_writes(rt: DashboardRuntime, thread_id: str, checkpoint_id: str, checkpoint_ns: str = "", *,
                   stored: list[tuple[str, str, Any]] | None = None) -> list[TaskWrites]:
    """The pending writes stored against one checkpoint, grouped by task id (tasks in first-write order).

    Call it after :func:`dashboard.threads.services.read_state` accepted the
    checkpoint (that is the mode gate). Returns ``[]`` when nothing is stored.

    Args:
        stored: the checkpoint's raw ``pending_writes`` already read with it
            (:attr:`dashboard.threads.services.StateView.pending_writes`); ``None`` reads the
            checkpoint again (``saver.get_tuple``, its blobs included).
    """
    if stored is None:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns,
                                   "checkpoint_id": checkpoint_id}}
        tup = rt.saver.get_tuple(config)
        stored = (tup.pending_writes or []) if tup else []
    tasks: dict[str, TaskWrites] = {}
    for task_id, channel, value in stored:
        tasks.setdefault(str(task_id), TaskWrites(str(task_id), [])).writes.append(_write(str(channel), value))
    return list(tasks.values())
