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
from types import MappingProxyType
from typing import Any

from deerflow.retention.plan import Node
from deerflow.runtime.delta_evidence import PRUNE_REFUSES

__all__ = ["BatchFacts", "parse_writes_facts", "read_batch_facts", "read_batch_nodes", "writes_facts",
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


def read_batch_nodes(session: Any, thread_ids: list[str]) -> dict[str, list[Node] | None]:
    """``{thread_id: the plan's nodes}`` (``None`` when a parent link does not resolve) of every thread with
    checkpoints, in one statement: :func:`read_batch_facts` without the sizes and LangGraph's facts."""
    rows = session.query(f"SELECT thread_id, {_node_columns(session.dialect)} FROM checkpoints WHERE "
                         "thread_id = ANY(?) GROUP BY thread_id", [thread_ids, thread_ids])
    return {r["thread_id"]: _nodes(r["ns"], r["ids"], r["parents"], r["roots"], r["owns"]) for r in rows}


def _node_columns(d: Any) -> str:
    """The aggregates a thread's nodes are built from (one ``?``: the thread ids, for the writes rows' keys)."""
    return ("array_agg(checkpoint_ns) AS ns, array_agg(checkpoint_id) AS ids, "
            "array_agg(parent_checkpoint_id) AS parents, "
            "array_agg(CASE WHEN strpos(checkpoint_ns, ':') > 0 THEN metadata ->> 'parents' END) AS roots, "
            "array_agg((thread_id, checkpoint_ns, checkpoint_id) IN (SELECT thread_id, checkpoint_ns, checkpoint_id "
            f"FROM {d.writes_table} WHERE thread_id = ANY(?))) AS owns")


def _nodes(namespaces: list[str], ids: list[str], parents: list[str | None], roots: list[str | None],
           owns: list[bool]) -> list[Node] | None:
    """The plan's nodes (``None`` when a parent link does not name an older checkpoint of its namespace)."""
    keys = set(zip(namespaces, ids, strict=True))
    nodes = []
    for ns, cid, parent, root, owned in zip(namespaces, ids, parents, roots, owns, strict=True):
        if parent is not None and (parent >= cid or (ns, parent) not in keys):
            return None
        nodes.append(Node(ns, cid, parent, {"parents": json.loads(root)} if root else _NONE, _NONE, bool(owned)))
    return nodes


def writes_facts(session: Any, thread_ids: list[str]) -> tuple[dict[str, set[_Key]], dict[str, int]]:
    """``({thread_id: keys of writes rows under no checkpoint}, {thread_id: bytes of writes rows and blobs})``."""
    return parse_writes_facts(session.query(writes_facts_sql(session.dialect), [thread_ids] * 3), thread_ids)


def writes_facts_sql(d: Any) -> str:
    """The statement :func:`writes_facts` reads (three ``?``: the thread ids), with columns ``thread_id``, ``ns``,
    ``id`` (a writes row's key under no checkpoint) and ``b`` (bytes, on the rows whose ``ns`` is ``NULL``)."""
    return (f"SELECT thread_id, NULL AS ns, NULL AS id, SUM({d.write_bytes(None)})::bigint AS b FROM {d.writes_table} "
            "WHERE thread_id = ANY(?) GROUP BY thread_id UNION ALL "
            f"SELECT thread_id, NULL, NULL, SUM({d.blob_bytes()}) FROM checkpoint_blobs WHERE thread_id = ANY(?) "
            "GROUP BY thread_id UNION ALL "
            f"SELECT DISTINCT w.thread_id, w.checkpoint_ns, w.checkpoint_id, NULL::bigint FROM {d.writes_table} w "
            "WHERE w.thread_id = ANY(?) AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id "
            "AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)")


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
