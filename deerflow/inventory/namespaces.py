"""The checkpoint namespaces of one thread: the root graph's and each subgraph invocation's.

LangGraph checkpoints a subgraph under its own ``checkpoint_ns``:
``<node>:<task_id>`` for a subgraph called from the root graph, and
``<node>:<task_id>|<node>:<task_id>`` one level deeper (the separators are
LangGraph's ``NS_END`` ``:`` and ``NS_SEP`` ``|``). The root graph's namespace
is ``""``. Each namespace has its own lineage, head and (in delta mode) its own
``DeltaChannel`` counters, so an operator reads each one separately.

One indexed query per thread (``GROUP BY checkpoint_ns`` over the thread's
rows of ``checkpoints``; the primary key starts with ``thread_id,
checkpoint_ns``): the cost is the thread's checkpoint count, never the
database's. Most threads never call a subgraph; whether one did is a single
probe of that key (:func:`has_subgraph_namespaces`), whatever its length.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deerflow.storage.sqlread import checkpoint_time, reader_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["Namespace", "has_subgraph_namespaces", "thread_namespaces"]

#: LangGraph's separators inside ``checkpoint_ns`` (``langgraph.constants.NS_SEP`` / ``NS_END``).
NS_SEP = "|"
NS_END = ":"


@dataclass(frozen=True)
class Namespace:
    """One ``checkpoint_ns`` of a thread.

    Attributes:
        checkpoint_ns: the namespace as stored (``""`` for the root graph).
        path: the subgraph node names from the root down (``()`` for the root;
            ``("research", "browse")`` for ``research:<id>|browse:<id>``).
        checkpoint_count: checkpoints stored under it (count).
        first_checkpoint_id: its oldest checkpoint id (UUIDv6: ids sort by time).
        head_checkpoint_id: its newest checkpoint id, the namespace's head.
        updated_at: the head's time (from the UUIDv6 id), UTC; ``None`` if the id is not a UUIDv6.
    """

    checkpoint_ns: str
    path: tuple[str, ...]
    checkpoint_count: int
    first_checkpoint_id: str
    head_checkpoint_id: str
    updated_at: dt.datetime | None

    @property
    def depth(self) -> int:
        """Subgraph nesting depth: 0 for the root graph, 1 for a subgraph it called, ..."""
        return len(self.path)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (``updated_at`` as ISO 8601)."""
        return {"checkpoint_ns": self.checkpoint_ns, "path": list(self.path), "depth": self.depth,
                "checkpoint_count": self.checkpoint_count, "first_checkpoint_id": self.first_checkpoint_id,
                "head_checkpoint_id": self.head_checkpoint_id,
                "updated_at": self.updated_at.isoformat() if self.updated_at else None}


def namespace_path(checkpoint_ns: str) -> tuple[str, ...]:
    """The subgraph node names in ``checkpoint_ns``, outermost first (``()`` for the root ``""``).

    A segment without ``:<task_id>`` is kept whole (LangGraph writes the task
    id, but a hand-written namespace need not have one).
    """
    if not checkpoint_ns:
        return ()
    return tuple(segment.split(NS_END, 1)[0] for segment in checkpoint_ns.split(NS_SEP))


def thread_namespaces(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[Namespace]:
    """Every ``checkpoint_ns`` of ``thread_id``: the root first, then subgraph namespaces by their first checkpoint.

    Args:
        saver: a SQLite or Postgres saver.
        thread_id: the thread.

    Returns:
        One :class:`Namespace` per namespace; empty when the thread has no checkpoints.

    Raises:
        NoSqlTablesError: the saver keeps no SQL tables (``InMemorySaver``; also a ``TypeError``).
    """
    rows = reader_for(saver).query(
        "SELECT checkpoint_ns, COUNT(*) AS n, MIN(checkpoint_id) AS first_id, MAX(checkpoint_id) AS head_id "
        "FROM checkpoints WHERE thread_id = ? GROUP BY checkpoint_ns", [thread_id])
    found = [Namespace(r["checkpoint_ns"], namespace_path(r["checkpoint_ns"]), int(r["n"]), r["first_id"],
                       r["head_id"], checkpoint_time(r["head_id"])) for r in rows]
    return sorted(found, key=lambda ns: (ns.checkpoint_ns != "", ns.first_checkpoint_id, ns.checkpoint_ns))


def has_subgraph_namespaces(saver: BaseCheckpointSaver[Any], thread_id: str) -> bool:
    """Whether ``thread_id`` has a checkpoint outside the root namespace (a subgraph's).

    One probe of the primary key's ``(thread_id, checkpoint_ns)`` prefix for a
    namespace after ``""`` (every non-empty string sorts after it): its cost does
    not grow with the thread's checkpoints, where :func:`thread_namespaces` reads
    them all.

    Args:
        saver: a SQLite or Postgres saver.
        thread_id: the thread.

    Returns:
        ``True`` if some checkpoint of the thread has a non-empty ``checkpoint_ns``;
        ``False`` otherwise (also for a thread with no checkpoints).

    Raises:
        NoSqlTablesError: the saver keeps no SQL tables (``InMemorySaver``; also a ``TypeError``).
    """
    return bool(reader_for(saver).query(
        "SELECT 1 AS found FROM checkpoints WHERE thread_id = ? AND checkpoint_ns > '' LIMIT 1", [thread_id]))
