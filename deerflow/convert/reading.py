"""Read one namespace's checkpoints through the saver, a page at a time.

``saver.list`` loads every row of a thread before yielding the first one (the
Postgres saver fetches them all), so a 2,000-turn delta thread would hold
hundreds of decoded snapshots at once. :func:`iter_checkpoints` asks the saver
for ``page_size`` checkpoints at a time (LangGraph's ``before`` and ``limit``
arguments), newest first, so only one page of raw rows is in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["PAGE_SIZE", "iter_checkpoints"]

PAGE_SIZE = 32  # checkpoints per saver.list call


def iter_checkpoints(saver: Any, thread_id: str, checkpoint_ns: str, *, page_size: int = PAGE_SIZE) -> Iterator[Any]:
    """Every ``CheckpointTuple`` of one ``(thread_id, checkpoint_ns)``, newest first, via the saver.

    Args:
        saver: a LangGraph checkpoint saver (sync API).
        thread_id: the thread.
        checkpoint_ns: the namespace (``""`` for the root graph).
        page_size: checkpoints fetched per ``saver.list`` call (count, >= 1).

    Yields:
        The saver's own tuples (pending writes included), exactly as ``saver.list`` returns them.
    """
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}}
    before = None
    while True:
        got = 0
        for tup in saver.list(config, before=before, limit=page_size):
            got += 1
            yield tup
            before = {"configurable": {"checkpoint_id": tup.config["configurable"]["checkpoint_id"]}}
        if got < page_size:
            return
