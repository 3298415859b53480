"""Can a delta checkpoint's messages be reconstructed from what is stored?

A delta checkpoint stores no message list: a reader replays the ``messages``
writes of its ancestors (``parent_checkpoint_id`` chain, same namespace)
back to the nearest *anchor*, a checkpoint that stores the list itself (a
``_DeltaSnapshot``, or a plain list written in full mode), or to the root.
LangGraph's readers stop silently where the chain breaks, so a pruned
snapshot ancestor, a dangling ``parent_checkpoint_id``, a parent cycle or a
cleared parent link (a parentless checkpoint that is not the namespace's
first) yields *fewer* messages, shown as if complete. :func:`find_lineage_gap`
finds such a break first, from metadata alone:

    anchor(c)  ⇔  c's metadata carries no ``counters_since_delta_snapshot.messages``

(LangGraph writes the counters on every delta checkpoint and drops them on
the snapshot checkpoint; full-mode checkpoints never carry them.) One
recursive query walks from the checkpoint towards its anchor; ``UNION``
drops a repeated row, so a cycle ends the walk. Nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deerflow.dialect import Dialect

__all__ = ["LineageGap", "find_lineage_gap"]


@dataclass(frozen=True)
class LineageGap:
    """Why the messages of ``checkpoint_id`` cannot be reconstructed.

    Attributes:
        kind: ``"missing_parent"`` (a parent row is absent: pruned, or a dangling
            ``parent_checkpoint_id``), ``"cycle"`` (the chain returns to ``at``) or
            ``"null_parent"`` (``at`` has no parent but is not the namespace's first checkpoint).
        checkpoint_id: the checkpoint that was asked for.
        at: the checkpoint whose parent link breaks the chain.
        parent: the parent id ``at`` names (``None`` for ``null_parent``).
        depth: checkpoints walked from ``checkpoint_id`` to ``at`` (count).
    """

    kind: str
    checkpoint_id: str
    at: str
    parent: str | None
    depth: int

    def describe(self) -> str:
        """One sentence for an operator."""
        if self.kind == "null_parent":
            return (f"checkpoint {self.at!r} has no parent but is not the first checkpoint of its namespace "
                    "(its parent link was cleared), before any snapshot was reached")
        if self.kind == "cycle":
            return (f"the parent chain loops: checkpoint {self.at!r} names {self.parent!r} as its parent, "
                    "which is its own descendant")
        return (f"checkpoint {self.at!r} names parent {self.parent!r}, which is not stored "
                "(pruned, or a dangling parent_checkpoint_id), before any snapshot was reached")


def _sql(dialect: Dialect) -> str:
    c, p = Dialect.truthy(dialect.counters("c")), Dialect.truthy(dialect.counters("p"))
    return f"""
        WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id, delta) AS (
            SELECT c.checkpoint_id, c.parent_checkpoint_id, {c}
            FROM checkpoints c
            WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = ?
            UNION
            SELECT p.checkpoint_id, p.parent_checkpoint_id, {p}
            FROM chain JOIN checkpoints p
              ON p.thread_id = ? AND p.checkpoint_ns = ? AND p.checkpoint_id = chain.parent_checkpoint_id
            WHERE chain.delta = 1
        )
        SELECT checkpoint_id, parent_checkpoint_id, delta FROM chain
    """


def _query(saver: Any, params: tuple) -> list[tuple[str, str | None, int]]:
    conn = saver.conn
    dialect = Dialect.of_connection(conn)
    if dialect is Dialect.SQLITE:
        with saver.lock:
            return [tuple(r) for r in conn.execute(_sql(dialect), params)]
    with saver._cursor() as cur:  # the saver's own pool/connection handling
        cur.execute(dialect.sql(_sql(dialect)), params)
        return [(r["checkpoint_id"], r["parent_checkpoint_id"], r["delta"]) for r in cur.fetchall()]


def _first_id(saver: Any, thread_id: str, checkpoint_ns: str) -> str | None:
    sql = "SELECT MIN(checkpoint_id) AS first FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
    conn = saver.conn
    dialect = Dialect.of_connection(conn)
    if dialect is Dialect.SQLITE:
        with saver.lock:
            return conn.execute(sql, (thread_id, checkpoint_ns)).fetchone()[0]
    with saver._cursor() as cur:
        cur.execute(dialect.sql(sql), (thread_id, checkpoint_ns))
        return cur.fetchone()["first"]


def find_lineage_gap(saver: Any, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> LineageGap | None:
    """The break between ``checkpoint_id`` and its anchor, or ``None`` when the replay chain is whole.

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver`` (other savers: ``None``).
    """
    if getattr(saver, "conn", None) is None:
        return None
    rows = _query(saver, (thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns))
    links = {cid: (parent, bool(delta)) for cid, parent, delta in rows}
    seen: list[str] = []
    current = checkpoint_id
    while current in links:
        parent, delta = links[current]
        if not delta:
            return None  # an anchor: a snapshot or a plain list
        if parent is None:
            if current == _first_id(saver, thread_id, checkpoint_ns):
                return None  # the root
            return LineageGap("null_parent", checkpoint_id, current, None, len(seen))
        if parent in seen or parent == current:
            return LineageGap("cycle", checkpoint_id, current, parent, len(seen))
        seen.append(current)
        current = parent
    if not seen:
        return None  # checkpoint_id itself is not stored: the caller reports that
    return LineageGap("missing_parent", checkpoint_id, seen[-1], current, len(seen) - 1)

