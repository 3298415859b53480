"""Read one namespace's checkpoints through the saver, a page at a time.

``saver.list`` loads every row of a thread before yielding the first one (the
Postgres saver fetches them all), so a 2,000-turn delta thread would hold
hundreds of decoded snapshots at once. :func:`iter_checkpoints` asks the saver
for ``page_size`` checkpoints at a time (LangGraph's ``before`` and ``limit``
arguments), newest first, so only one page of raw rows is in memory.
:func:`iter_session_checkpoints` gives the same tuples from a conversion
session, on Postgres without the saver's array aggregates
(:mod:`deerflow.convert.postgres_pages`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from deerflow.convert.postgres_pages import iter_postgres_checkpoints
from deerflow.storage.addressing import config_for

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

__all__ = ["PAGE_SIZE", "iter_checkpoints", "iter_session_checkpoints"]

PAGE_SIZE = 32  # checkpoints per saver.list call


def iter_checkpoints(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str, *,
                     page_size: int = PAGE_SIZE) -> Iterator[CheckpointTuple]:
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
    config = config_for(thread_id, checkpoint_ns)
    before: RunnableConfig | None = None
    while True:
        got = 0
        for tup in saver.list(config, before=before, limit=page_size):
            got += 1
            yield tup
            before = {"configurable": {"checkpoint_id": tup.config["configurable"]["checkpoint_id"]}}
        if got < page_size:
            return


def iter_session_checkpoints(session: Any, thread_id: str, checkpoint_ns: str, *,
                             page_size: int = PAGE_SIZE) -> Iterator[CheckpointTuple]:
    """:func:`iter_checkpoints` through ``session.saver``; on Postgres read by
    :func:`~deerflow.convert.postgres_pages.iter_postgres_checkpoints` on ``session.conn`` (the same tuples,
    about a third of the server time for rows holding whole message lists).

    Args:
        session: a :class:`~deerflow.storage.sessions.ConversionSession` (its saver, connection and dialect).
        thread_id, checkpoint_ns, page_size: as :func:`iter_checkpoints`.

    Yields:
        ``CheckpointTuple`` s, newest first, equal to ``saver.list``'s.
    """
    if session.dialect.has_blob_table:
        return iter_postgres_checkpoints(session.saver, session.conn, thread_id, checkpoint_ns, page_size=page_size)
    return iter_checkpoints(session.saver, thread_id, checkpoint_ns, page_size=page_size)
