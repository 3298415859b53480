"""Ids the way LangGraph makes them, at chosen times: checkpoint UUIDv6 and task ids.

A LangGraph checkpoint id is ``uuid6(clock_seq=step)``
(``langgraph.checkpoint.base.id.uuid6``): 60 bits of time in 100 ns ticks
since 1582-10-15, the step in the 14-bit clock sequence, 48 random node bits.
:func:`uuid6_at` builds the same layout for a given time, so a copied
checkpoint keeps its step bits and its ids sort by (chosen) creation time.

A task id is ``task_id_func(checkpoint_id_bytes, *parts)`` (``_xxhash_str``
for checkpoint format v2+, ``_uuid5_str`` before). :class:`TaskIdRecorder`
records ``parts`` for every task id LangGraph computes while a template runs,
so :meth:`TaskIdRecorder.remap` recomputes a task id for a new checkpoint id
with LangGraph's own function.
"""

from __future__ import annotations

import binascii
import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from deerflow._langgraph_compat import _algo

__all__ = ["TaskIdRecorder", "clock_seq_of", "iso_ts", "unix_us_of", "uuid6_at"]

#: 100 ns ticks between the UUID epoch (1582-10-15) and the Unix epoch.
_UUID_EPOCH_TICKS = 0x01B21DD213814000
_NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"


def uuid6_at(unix_us: int, clock_seq: int, node: int) -> str:
    """The UUIDv6 string LangGraph's ``uuid6(node, clock_seq)`` returns at ``unix_us``.

    Args:
        unix_us: creation time, microseconds since the Unix epoch.
        clock_seq: 14-bit clock sequence (LangGraph passes the step; negative wraps).
        node: 48 random bits.
    """
    ticks = unix_us * 10 + _UUID_EPOCH_TICKS
    value = ((ticks >> 12) & 0xFFFFFFFFFFFF) << 80
    value |= (0x6000 | (ticks & 0x0FFF)) << 64
    value |= (0x8000 | (clock_seq & 0x3FFF)) << 48
    value |= node & 0xFFFFFFFFFFFF
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def clock_seq_of(checkpoint_id: str) -> int:
    """The 14-bit clock sequence of a UUIDv6 string (LangGraph: the step, modulo 2**14)."""
    return int(checkpoint_id[19:23], 16) & 0x3FFF


def unix_us_of(checkpoint_id: str) -> int:
    """The creation time of a UUIDv6 string, microseconds since the Unix epoch."""
    h = checkpoint_id.replace("-", "")
    ticks = (int(h[0:12], 16) << 12) | int(h[13:16], 16)
    return (ticks - _UUID_EPOCH_TICKS) // 10


def iso_ts(unix_us: int) -> str:
    """LangGraph's checkpoint ``ts`` (``datetime.isoformat()``, UTC) for ``unix_us``.

    Whole seconds are nudged by one microsecond so the string always has the
    6-digit fraction (and one length): ``isoformat`` drops it at ``.000000``.
    """
    if unix_us % 1_000_000 == 0:
        unix_us += 1
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=unix_us)).isoformat()


class TaskIdRecorder:
    """Remember how LangGraph computed each task id, to recompute it for another checkpoint id.

    Use :meth:`recording` around the template run. Task ids are deterministic
    functions of the checkpoint id and ``parts`` (namespace, step, node,
    trigger kind, triggers), so ``remap(task_id, new_checkpoint_id)`` is what
    LangGraph would have computed had the checkpoint carried the new id.
    """

    def __init__(self) -> None:
        self._parts: dict[str, tuple[str, bytes, tuple[Any, ...]]] = {}

    @contextmanager
    def recording(self) -> Iterator[TaskIdRecorder]:
        """Patch LangGraph's two task-id functions for the duration (one thread only)."""
        originals = {name: getattr(_algo, name) for name in ("_xxhash_str", "_uuid5_str")}

        def wrap(name: str) -> Any:
            original = originals[name]

            def recorder(namespace: bytes, *parts: Any) -> str:
                task_id = str(original(namespace, *parts))
                self._parts[task_id] = (name, namespace, parts)
                return task_id
            return recorder

        for name in originals:
            setattr(_algo, name, wrap(name))
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(_algo, name, original)

    def knows(self, task_id: str, checkpoint_id: str) -> bool:
        """True if ``task_id`` was computed from ``checkpoint_id`` (or is LangGraph's null task id)."""
        if task_id == _NULL_TASK_ID:
            return True
        entry = self._parts.get(task_id)
        return entry is not None and entry[1] == binascii.unhexlify(checkpoint_id.replace("-", ""))

    def remap(self, task_id: str, checkpoint_id: str) -> str:
        """The id LangGraph computes for the same task on checkpoint ``checkpoint_id``.

        Raises:
            KeyError: ``task_id`` was not seen while recording.
        """
        if task_id == _NULL_TASK_ID:
            return task_id
        name, _namespace, parts = self._parts[task_id]
        return str(getattr(_algo, name)(binascii.unhexlify(checkpoint_id.replace("-", "")), *parts))
