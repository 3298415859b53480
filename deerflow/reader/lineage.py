"""Can a delta checkpoint's messages be reconstructed from what is stored?

A delta checkpoint stores no message list: a reader replays the ``messages``
writes of its ancestors (``parent_checkpoint_id`` chain, same namespace)
back to the nearest *anchor*, or to the root. The walk here is exactly the
one LangGraph's reader (``get_delta_channel_history``) follows: it stops only
at a checkpoint that stores a ``messages`` value, whatever its metadata says
(a checkpoint with neither delta counters nor a stored value is walked past,
as the reader walks past it):

* SQLite: the stored checkpoint's ``channel_values["messages"]`` is not
  ``None`` (the saver's serializer decodes the row, as its reader does). A
  stored ``None`` is walked past: it is no seed for the replay rule
  (:mod:`deerflow.convert.onepass`), although LangGraph's SQLite reader
  restarts from ``[]`` there; :func:`replay_chain` reports it so the caller
  can compare both readings (:mod:`deerflow.reader.compare`).
* Postgres: a ``checkpoint_blobs`` row (type not ``empty``) at the
  checkpoint's ``messages`` version, or a non-null inline value in its
  ``channel_values`` (the saver's stage-1 probe).

LangGraph's readers stop silently where the chain breaks, so a pruned
snapshot ancestor, a dangling ``parent_checkpoint_id``, a parent cycle or a
cleared parent link (a parentless checkpoint that is not the namespace's
first) yields *fewer* messages, shown as if complete. :func:`find_lineage_gap`
finds such a break first. One recursive query walks from the checkpoint
towards its anchor (rows streamed; the walk stops at the anchor or at a
repeated row, so a cycle ends it). Nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deerflow.storage.driver_errors import translated
from deerflow.storage.sqlread import has_sql_tables, reader_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["LineageGap", "ReplayChain", "branch_points", "find_lineage_gap", "replay_chain", "replay_chains"]


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


MESSAGES = "messages"


@dataclass(frozen=True)
class ReplayChain:
    """The replay walk from a checkpoint to its anchor, as :func:`replay_chain` found it.

    Attributes:
        gap: the break the walk ran into, or ``None`` when it is whole.
        checkpoint_ids: the checkpoint and its ancestors walked, nearest first (the anchor last).
        stored_none: those of ``checkpoint_ids`` that store ``messages = None`` (walked past).
    """

    gap: LineageGap | None
    checkpoint_ids: tuple[str, ...]
    stored_none: frozenset[str]

#: Postgres: one row per ancestor with ``stored`` computed as the saver's stage-1 probe does.
_POSTGRES_SQL = """
    WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id, stored) AS (
        SELECT c.checkpoint_id, c.parent_checkpoint_id, {stored_c}
        FROM checkpoints c
        WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id {seed}
        UNION
        SELECT p.checkpoint_id, p.parent_checkpoint_id, {stored_p}
        FROM chain JOIN checkpoints p
          ON p.thread_id = ? AND p.checkpoint_ns = ? AND p.checkpoint_id = chain.parent_checkpoint_id
        WHERE NOT chain.stored
    )
    SELECT chain.checkpoint_id, chain.parent_checkpoint_id, chain.stored,
           jsonb_typeof(k.checkpoint -> 'channel_values' -> 'messages') = 'null' AS stored_none
    FROM chain JOIN checkpoints k
      ON k.thread_id = ? AND k.checkpoint_ns = ? AND k.checkpoint_id = chain.checkpoint_id
"""
_POSTGRES_STORED = """(
    COALESCE(jsonb_typeof({a}.checkpoint -> 'channel_values' -> 'messages'), 'null') NOT IN ('null')
    OR EXISTS (SELECT 1 FROM checkpoint_blobs b
               WHERE b.thread_id = {a}.thread_id AND b.checkpoint_ns = {a}.checkpoint_ns
                 AND b.channel = 'messages' AND b.version = {a}.checkpoint -> 'channel_versions' ->> 'messages'
                 AND b.type <> 'empty'))"""

#: SQLite: the ancestor rows themselves, streamed; the anchor test decodes each (UNION ALL: the
#: caller stops at a repeated id, as the saver's reader does).
_SQLITE_SQL = """
    WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id, type, checkpoint) AS (
        SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint FROM checkpoints
        WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
        UNION ALL
        SELECT c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint
        FROM chain CROSS JOIN checkpoints c ON c.checkpoint_id = chain.parent_checkpoint_id
        WHERE c.thread_id = ? AND c.checkpoint_ns = ?
    )
    SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint FROM chain
"""


def _chain(saver: BaseCheckpointSaver[Any], params: tuple[Any, ...]) -> list[tuple[str, str | None, bool, bool]]:
    """``[(checkpoint_id, parent_id, stores_messages, stores_none)]``: the checkpoint up to its anchor (included)."""
    reader = reader_for(saver)
    if reader.dialect.has_blob_table:  # Postgres: the stage-1 probe, in SQL
        return _postgres_rows(saver, params, "= ?")
    # SQLite: values live inside the checkpoint blob; rows are streamed and the walk stops at the anchor
    out: list[tuple[str, str | None, bool, bool]] = []
    seen: set[str] = set()
    with reader.reading() as tx, translated():
        for cid, parent, type_tag, blob in tx.conn.execute(_SQLITE_SQL, params):
            if cid in seen:
                break
            seen.add(cid)
            values = saver.serde.loads_typed((type_tag, blob)).get("channel_values") or {}
            none = MESSAGES in values and values[MESSAGES] is None
            out.append((cid, parent, MESSAGES in values and not none, none))
            if out[-1][2]:
                break
    return out


def _postgres_rows(saver: BaseCheckpointSaver[Any], params: tuple[Any, ...],
                   seed: str) -> list[tuple[str, str | None, bool, bool]]:
    """:data:`_POSTGRES_SQL` seeded by ``checkpoint_id {seed}`` (one id, or ``= ANY(?)`` of a list)."""
    sql = _POSTGRES_SQL.format(stored_c=_POSTGRES_STORED.format(a="c"),
                               stored_p=_POSTGRES_STORED.format(a="p"), seed=seed)
    return [(r["checkpoint_id"], r["parent_checkpoint_id"], bool(r["stored"]), bool(r["stored_none"]))
            for r in reader_for(saver).query(sql, [*params, params[0], params[1]])]


#: Parents whose stored ``messages`` writes a child may not have consumed: two or more children, or
#: an ``input`` child (its input step abandoned the parent's pending tasks); ``{meta}`` reads ``source``.
_BRANCH_SQL = """
    SELECT parent_checkpoint_id AS p FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?
      AND parent_checkpoint_id IS NOT NULL{among} GROUP BY parent_checkpoint_id HAVING COUNT(*) > 1
    UNION
    SELECT c.parent_checkpoint_id AS p FROM checkpoints c
    WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.parent_checkpoint_id IS NOT NULL{among_c}
      AND {meta} = 'input'
      AND EXISTS (SELECT 1 FROM {writes} w WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns
                  AND w.checkpoint_id = c.parent_checkpoint_id AND w.channel = 'messages')
"""


#: Most candidates :func:`branch_points` names in its statement (each twice); more are answered from the
#: namespace's whole set, intersected.
AMONG_MAX = 400


def branch_points(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str,
                  among: Sequence[str] | None = None) -> frozenset[str]:
    """The checkpoints of one namespace whose ``messages`` writes some child may not have consumed.

    Those with two or more children (LangGraph #8443), and those with an
    ``input`` child (``metadata.source``) that store ``messages`` writes
    (DeerFlow #4458): the second kind is decided by the stored data alone,
    so deleting a sibling (retention) does not change which checkpoints the
    replay rule and LangGraph's reader are compared at. One grouped scan of
    the thread's rows plus one scan of its ``input`` checkpoints.

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver`` (other savers: empty).
        among: only these candidates (e.g. a replay chain's ancestors, all a single read asks about):
            the same answer as ``branch_points(...) & set(among)``, without grouping the whole namespace
            (more than :data:`AMONG_MAX` candidates: that intersection).

    Returns:
        Their ids.
    """
    if not has_sql_tables(saver) or (among is not None and not among):
        return frozenset()
    if among is not None and len(among) > AMONG_MAX:  # bound the statement's parameters (SQLite: 999 on old builds)
        return branch_points(saver, thread_id, checkpoint_ns) & frozenset(among)
    reader = reader_for(saver)
    params: list[Any] = [thread_id, checkpoint_ns, thread_id, checkpoint_ns]
    cond = cond_c = ""
    if among is not None:
        where, values = reader.dialect.in_list("parent_checkpoint_id", list(among))
        where_c, _ = reader.dialect.in_list("c.parent_checkpoint_id", list(among))
        cond, cond_c = f" AND {where}", f" AND {where_c}"
        params = [thread_id, checkpoint_ns, *values, thread_id, checkpoint_ns, *values]
    sql = _BRANCH_SQL.format(meta=reader.dialect.source("c"), writes=reader.writes_table, among=cond, among_c=cond_c)
    return frozenset(r["p"] for r in reader.query(sql, params))


def _first_id(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str) -> str | None:
    """The namespace's first checkpoint id (LangGraph's ids sort by time), or ``None`` when it has none."""
    rows = reader_for(saver).query(
        "SELECT MIN(checkpoint_id) AS first FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
        [thread_id, checkpoint_ns])
    first: str | None = rows[0]["first"]
    return first


def find_lineage_gap(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str,
                     checkpoint_id: str) -> LineageGap | None:
    """The break between ``checkpoint_id`` and its anchor, or ``None`` when the replay chain is whole.

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver`` (other savers: ``None``).
        thread_id, checkpoint_ns, checkpoint_id: the checkpoint to reconstruct.

    Returns:
        ``None`` when the walk reaches a stored value or the namespace's first
        checkpoint (or ``checkpoint_id`` is not stored); else the
        :class:`LineageGap` the walk ran into.
    """
    return replay_chain(saver, thread_id, checkpoint_ns, checkpoint_id).gap


def replay_chain(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str,
                 checkpoint_id: str) -> ReplayChain:
    """The walk :func:`find_lineage_gap` makes, with the checkpoints it passed.

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver`` (other savers: an empty chain, no gap).
        thread_id, checkpoint_ns, checkpoint_id: the checkpoint to reconstruct.

    Returns:
        A :class:`ReplayChain`.
    """
    if not has_sql_tables(saver):
        return ReplayChain(None, (), frozenset())
    rows = _chain(saver, (thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns))
    links = {cid: (parent, stored) for cid, parent, stored, _none in rows}
    nones = frozenset(cid for cid, _parent, _stored, none in rows if none)
    return _walk(checkpoint_id, links, nones, lambda: _first_id(saver, thread_id, checkpoint_ns))


def replay_chains(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str,
                  checkpoint_ids: list[str]) -> dict[str, ReplayChain]:
    """:func:`replay_chain` of several checkpoints of one namespace (a history page), equal to it for each.

    On Postgres one recursive query walks from all of them at once (the rows
    their walks share are read once); on SQLite each is walked as
    :func:`replay_chain` walks it.

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver`` (other savers: empty chains, no gap).
        thread_id, checkpoint_ns: the namespace.
        checkpoint_ids: the checkpoints to reconstruct.

    Returns:
        ``{checkpoint_id: ReplayChain}`` for every id given.
    """
    if not checkpoint_ids or not has_sql_tables(saver) or not reader_for(saver).dialect.has_blob_table:
        return {cid: replay_chain(saver, thread_id, checkpoint_ns, cid) for cid in checkpoint_ids}
    rows = _postgres_rows(saver, (thread_id, checkpoint_ns, list(checkpoint_ids), thread_id, checkpoint_ns),
                          "= ANY(?)")
    links = {cid: (parent, stored) for cid, parent, stored, _none in rows}
    none_ids = {cid for cid, _parent, _stored, none in rows if none}
    first: list[str | None] = []

    def first_id() -> str | None:
        if not first:
            first.append(_first_id(saver, thread_id, checkpoint_ns))
        return first[0]

    return {cid: _walk(cid, links, frozenset(none_ids & _reached(cid, links)), first_id)
            for cid in checkpoint_ids}


def _reached(checkpoint_id: str, links: dict[str, tuple[str | None, bool]]) -> set[str]:
    """The rows the recursive query returns when seeded with ``checkpoint_id`` alone: itself and, up from
    each row that stores no value, its parent (each row once)."""
    out: set[str] = set()
    current: str | None = checkpoint_id
    while current is not None and current in links and current not in out:
        out.add(current)
        parent, stored = links[current]
        current = None if stored else parent
    return out


def _walk(checkpoint_id: str, links: dict[str, tuple[str | None, bool]], nones: frozenset[str],
          first_id: Any) -> ReplayChain:
    """The chain from ``checkpoint_id`` through ``links`` (``{id: (parent, stores a value)}``); ``first_id()``
    names the namespace's first checkpoint (asked only when the walk ends at a parentless row)."""
    seen: list[str] = []
    current = checkpoint_id

    def done(gap: LineageGap | None) -> ReplayChain:
        return ReplayChain(gap, tuple(seen), nones)

    while current in links:
        parent, stored = links[current]
        if stored:
            seen.append(current)
            return done(None)  # an anchor: the reader seeds from the value stored here
        if parent is None:
            seen.append(current)
            if current == first_id():
                return done(None)  # the root
            return done(LineageGap("null_parent", checkpoint_id, current, None, len(seen) - 1))
        if parent in seen or parent == current:
            return done(LineageGap("cycle", checkpoint_id, current, parent, len(seen)))
        seen.append(current)
        current = parent
    if not seen:
        return done(None)  # checkpoint_id itself is not stored: the caller reports that
    return done(LineageGap("missing_parent", checkpoint_id, seen[-1], current, len(seen) - 1))
