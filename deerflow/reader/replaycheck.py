"""Which stored write makes a delta checkpoint's ``messages`` replay fail?

LangGraph's reader rebuilds a delta checkpoint's ``messages`` by folding the
writes stored under its ancestors (back to the nearest stored value) with the
channel's reducer. A write the reducer refuses -- a ``RemoveMessage`` naming
an id that is not in the list (possible in data written by any reducer
version), or a ``None`` write -- makes that read raise ``ValueError``.
:func:`find_reducer_failure` names the write: the checkpoint it is stored
under, its task and position, and the missing message id. It walks the same
parent chain the reader walks (``get_tuple`` + ``parent_config``, stopping at
a stored ``messages`` value), and replays as ``DeltaChannel.replay_writes``
does: from the last ``Overwrite`` on, write by write. Read-only; meant for
the error path (one ``get_tuple`` per ancestor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from deerflow._langgraph_compat import _get_overwrite
from deerflow.agents.thread_state import merge_message_writes
from deerflow.convert.onepass import stored_seed
from deerflow.storage.addressing import config_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["ReducerFailure", "find_reducer_failure"]

MESSAGES = "messages"


@dataclass(frozen=True)
class ReducerFailure:
    """The first stored ``messages`` write the reducer refuses on the way to a checkpoint.

    Attributes:
        checkpoint_id: the checkpoint whose read fails.
        write_checkpoint_id: the ancestor the write is stored under (``checkpoint_writes``).
        task_id: the write's task id.
        write_index: the write's position among that task's ``messages`` writes there (0-based).
        missing_ids: ids the write's ``RemoveMessage`` items name that the list does not hold
            (empty for a ``None`` write).
        reason: the reducer's own message.
    """

    checkpoint_id: str
    write_checkpoint_id: str
    task_id: str
    write_index: int
    missing_ids: tuple[str, ...]
    reason: str

    def describe(self) -> str:
        """One sentence for an operator."""
        what = (f"removes message id {', '.join(repr(i) for i in self.missing_ids)}, which is not in the list"
                if self.missing_ids else f"is refused by the reducer ({self.reason})")
        return (f"the messages write {self.write_index} of task {self.task_id!r} stored under checkpoint "
                f"{self.write_checkpoint_id!r} {what}")


def _chain_writes(saver: BaseCheckpointSaver[Any], target: Any) -> tuple[Any, list[tuple[str, str, int, Any]]] | None:
    """``(seed, [(write_checkpoint_id, task_id, index, value)] oldest first)``, or ``None`` if the target stores one."""
    if MESSAGES in (target.checkpoint.get("channel_values") or {}):
        return None
    collected: list[list[tuple[str, str, int, Any]]] = []
    seed: Any = None
    seen: set[str] = set()
    config = target.parent_config
    while config is not None:
        tup = saver.get_tuple(config)
        if tup is None:
            break
        cid = tup.config["configurable"]["checkpoint_id"]
        if cid in seen:
            break
        seen.add(cid)
        per_task: dict[str, int] = {}
        here = []
        for task_id, channel, value in tup.pending_writes or []:
            if channel != MESSAGES:
                continue
            index = per_task.get(task_id, 0)
            per_task[task_id] = index + 1
            here.append((cid, task_id, index, value))
        collected.append(here)
        values = tup.checkpoint.get("channel_values") or {}
        if MESSAGES in values:
            seed = values[MESSAGES]
            break
        config = tup.parent_config
    writes = [w for here in reversed(collected) for w in here]
    return seed, writes


def _ids(messages: list[Any]) -> set[str]:
    return {mid for m in messages if (mid := getattr(m, "id", None)) is not None}


def find_reducer_failure(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str,
                         checkpoint_id: str) -> ReducerFailure | None:
    """The stored write that makes reading ``checkpoint_id``'s messages raise, if one does.

    Args:
        saver: any LangGraph saver (``get_tuple`` with ``pending_writes``).
        thread_id, checkpoint_ns, checkpoint_id: the checkpoint whose read failed.

    Returns:
        A :class:`ReducerFailure`, or ``None`` when the checkpoint is not stored,
        stores its own value, or its replay goes through.
    """
    target = saver.get_tuple(config_for(thread_id, checkpoint_ns, checkpoint_id))
    if target is None:
        return None
    found = _chain_writes(saver, target)
    if found is None:
        return None
    seed, writes = found
    is_seed, seed_value, _wrapped = stored_seed(seed)
    value: list[Any] = list(seed_value) if is_seed and isinstance(seed_value, (list, tuple)) else []
    start = 0
    for i, (*_where, write) in enumerate(writes):
        is_overwrite, payload = _get_overwrite(write)
        if is_overwrite:
            value, start = list(payload or []), i + 1
    for write_cid, task_id, index, write in writes[start:]:
        try:
            value = merge_message_writes(value, [write])
        except ValueError as exc:
            items = write if isinstance(write, (list, tuple)) else [write]
            present = _ids(value)
            missing = tuple(m.id for m in items if isinstance(m, RemoveMessage) and m.id is not None
                            and m.id != REMOVE_ALL_MESSAGES and m.id not in present)
            return ReducerFailure(checkpoint_id, write_cid, task_id, index, missing, str(exc))
    return None
