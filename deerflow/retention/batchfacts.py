"""What a batch of Postgres threads is planned from, read in one statement for the whole batch.

:func:`read_batch_facts` gives each thread's plan nodes (from the rows'
columns: namespace, id, parent link, whether writes rows are stored under
it, and ``metadata.parents`` where the plan reads it; no value decoded), the
bytes it stores and the facts LangGraph's ``keep_latest`` is checked
against. :mod:`deerflow.retention.delegate` plans LangGraph's prune from
them, and :func:`deerflow.retention.batch.prune_threads` finds the threads a
keep-last prune leaves as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import repeat
from types import MappingProxyType
from typing import Any

from deerflow.retention.plan import Forest, Node
from deerflow.retention.proof import UNNEST_KEYS
from deerflow.retention.setbased import key_columns
from deerflow.runtime.delta_evidence import PRUNE_REFUSES

__all__ = ["BatchFacts", "parse_writes_facts", "read_batch_facts", "read_batch_forests", "writes_facts",
           "writes_facts_sql"]

_Key = tuple[str, str]
_NONE: Mapping[str, Any] = MappingProxyType({})  # the metadata and versions a node is not read for (shared, read-only)


@dataclass
class BatchFacts:
    """One thread as a batch reads it: the plan's nodes (``None``: a parent link does not resolve), whether
    LangGraph's ``keep_latest`` would not do the plan (delta evidence, a format before v4), the writes rows
    stored under no checkpoint, and the bytes in LangGraph's three tables."""

    nodes: list[Node] | None
    refused: bool
    orphan_writes: set[_Key]
    stored_bytes: int


def read_batch_facts(session: Any, thread_ids: list[str]) -> dict[str, BatchFacts]:
    """Every thread's :class:`BatchFacts` in one statement, from the columns the plan needs (no value decoded).

    A node carries ``metadata.parents`` only in a subgraph call's namespace (the one place the plan reads it).
    """
    d = session.dialect
    refuses = "(" + " OR ".join(d.clause(c, "c") for c in PRUNE_REFUSES) + ")"  # LangGraph's prune takes it for delta
    rows = session.query(
        f"SELECT thread_id, {_node_columns(d)}, "
        f"bool_or({refuses} OR COALESCE(checkpoint ->> 'v', '0')::int < 4) AS refused, "
        f"SUM({d.checkpoint_bytes(None)}) AS b FROM checkpoints c WHERE thread_id = ANY(?) GROUP BY thread_id",
        [thread_ids, thread_ids])
    orphans, others = writes_facts(session, thread_ids)
    out = {}
    for r in rows:
        t = r["thread_id"]
        nodes = _nodes(r["ns"], r["ids"], r["parents"], r["roots"], r["owns"])
        out[t] = BatchFacts(nodes, bool(r["refused"]), orphans[t], int(r["b"] or 0) + others[t])
    return out


def read_batch_forests(session: Any, thread_ids: list[str]) -> dict[str, Forest | None]:
    """``{thread_id: the keep-last rule's forest}`` (``None`` when a parent link does not resolve) of every thread
    with checkpoints, in two statements: the rows' columns, then which leaves own writes rows. No :class:`Node` is
    built: a batch's threads hold tens of thousands of checkpoints.

    The forest's ``owners`` holds leaves only (checkpoints no checkpoint of their namespace names as parent):
    :func:`~deerflow.retention.plan.plan_keep_last` asks it of leaves alone (pending writes are a leaf's), and a
    writes lookup of every checkpoint costs more than the rest of the read. Not for
    :func:`~deerflow.retention.plan.plan_safe_only`, which asks it of inner checkpoints too.
    """
    rows = session.query(f"SELECT thread_id, {_COLUMNS} FROM checkpoints WHERE thread_id = ANY(?) "
                         "GROUP BY thread_id", [thread_ids], binary=True)
    forests = {r["thread_id"]: _forest(r["ns"], r["ids"], r["parents"], r["roots"]) for r in rows}
    leaves = sorted((t, ns, cid) for t, forest in forests.items() if forest is not None
                    for ns, tree in forest.parents.items() for cid in tree.keys() - set(tree.values()))
    if leaves:
        for w in session.query(
                f"SELECT DISTINCT thread_id, checkpoint_ns, checkpoint_id FROM {session.dialect.writes_table} WHERE "
                f"(thread_id, checkpoint_ns, checkpoint_id) IN ({UNNEST_KEYS})",
                key_columns(leaves)):
            forests[w["thread_id"]].owners.add((w["checkpoint_ns"], w["checkpoint_id"]))  # type: ignore[union-attr]
    return forests


def _forest(namespaces: list[str], ids: list[str], parents: list[str | None],
            roots: list[str | None]) -> Forest | None:
    """The forest of one thread's columns (``None`` when a parent link does not name an older checkpoint of its
    namespace); ``owners`` is left empty."""
    if _dangling(namespaces, ids, parents):
        return None
    call_roots = {(ns, cid): json.loads(root) for ns, cid, root in zip(namespaces, ids, roots, strict=True) if root}
    return Forest.of_columns(namespaces, ids, parents, call_roots)


def _dangling(namespaces: list[str], ids: list[str], parents: list[str | None]) -> bool:
    """True when a parent link does not name an older checkpoint of its namespace."""
    linked = [(ns, parent, cid) for ns, parent, cid in zip(namespaces, parents, ids, strict=True) if parent is not None]
    return any(parent >= cid for _ns, parent, cid in linked) or \
        not {(ns, parent) for ns, parent, _cid in linked} <= set(zip(namespaces, ids, strict=True))


#: The aggregates a thread's nodes are built from, but whether each owns writes rows.
_COLUMNS = ("array_agg(checkpoint_ns) AS ns, array_agg(checkpoint_id) AS ids, "
            "array_agg(parent_checkpoint_id) AS parents, "
            "array_agg(CASE WHEN strpos(checkpoint_ns, ':') > 0 THEN metadata ->> 'parents' END) AS roots")


def _node_columns(d: Any) -> str:
    """The aggregates a thread's nodes are built from (one ``?``: the thread ids, for the writes rows' keys)."""
    return (f"{_COLUMNS}, array_agg((thread_id, checkpoint_ns, checkpoint_id) IN (SELECT thread_id, "
            f"checkpoint_ns, checkpoint_id FROM {d.writes_table} WHERE thread_id = ANY(?))) AS owns")


def _nodes(namespaces: list[str], ids: list[str], parents: list[str | None], roots: list[str | None],
           owns: list[bool]) -> list[Node] | None:
    """The plan's nodes (``None`` when a parent link does not name an older checkpoint of its namespace)."""
    if _dangling(namespaces, ids, parents):
        return None
    metadata = [{"parents": json.loads(root)} if root else _NONE for root in roots]
    return list(map(Node, namespaces, ids, parents, metadata, repeat(_NONE), map(bool, owns)))


def writes_facts(session: Any, thread_ids: list[str]) -> tuple[dict[str, set[_Key]], dict[str, int]]:
    """``({thread_id: keys of writes rows under no checkpoint}, {thread_id: bytes of writes rows and blobs})``."""
    return parse_writes_facts(session.query(writes_facts_sql(session.dialect), [thread_ids] * 4), thread_ids)


def writes_facts_sql(d: Any) -> str:
    """The statement :func:`writes_facts` reads (four ``?``: the thread ids), with columns ``thread_id``, ``ns``,
    ``id`` (a writes row's key under no checkpoint) and ``b`` (bytes, on the rows whose ``ns`` is ``NULL``). The
    checkpoints an orphan is looked for among are the threads' own, so the planner hashes those rows alone."""
    return (f"SELECT thread_id, NULL AS ns, NULL AS id, SUM({d.write_bytes(None)})::bigint AS b FROM {d.writes_table} "
            "WHERE thread_id = ANY(?) GROUP BY thread_id UNION ALL "
            f"SELECT thread_id, NULL, NULL, SUM({d.blob_bytes()}) FROM checkpoint_blobs WHERE thread_id = ANY(?) "
            "GROUP BY thread_id UNION ALL "
            f"SELECT DISTINCT w.thread_id, w.checkpoint_ns, w.checkpoint_id, NULL::bigint FROM {d.writes_table} w "
            "WHERE w.thread_id = ANY(?) AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = ANY(?) "
            "AND c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = "
            "w.checkpoint_id)")


def parse_writes_facts(rows: list[dict[str, Any]],
                       thread_ids: list[str]) -> tuple[dict[str, set[_Key]], dict[str, int]]:
    """:func:`writes_facts`' answer from the rows of :func:`writes_facts_sql`."""
    orphans: dict[str, set[_Key]] = {t: set() for t in thread_ids}
    sizes = dict.fromkeys(thread_ids, 0)
    for r in rows:
        if r["ns"] is None:
            sizes[r["thread_id"]] += int(r["b"] or 0)
        else:
            orphans[r["thread_id"]].add((r["ns"], r["id"]))
    return orphans, sizes
