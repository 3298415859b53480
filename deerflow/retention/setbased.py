"""The set-based prune of one Postgres thread: a plan from the rows' columns, one statement per table.

The general path (:mod:`deerflow.retention.prune`) walks and materializes
every checkpoint of the thread, because a delta checkpoint's value lives in
its ancestors. Most threads need none of that: when no chain start needs a
rebase (a full-mode thread, or chain starts that store their own seed), the
plan needs only each row's ``checkpoint_ns``, ids, ``metadata`` and
``channel_versions``, read in one statement without decoding a value, and
the change is one statement per table:

* the deleted checkpoints, their writes rows and the garbage blobs go by
  ``DELETE ... WHERE (checkpoint_ns, checkpoint_id) IN (unnest(...))``;
* with a backup, each of those statements *moves* its rows
  (``WITH d AS (DELETE ... RETURNING ...) INSERT INTO dfa_backup_... SELECT
  ... FROM d``), and the rows kept are copied beside them, so the backup
  holds the whole thread as :func:`deerflow.convert.backups.restore_rows`
  expects (a revert is byte-identical);
* the parent links of the chain starts are cleared in one ``UPDATE``.

So a prune costs the kept checkpoints (read through LangGraph's reader
before and after, the verification) plus one pass of the database over the
deleted rows, as LangGraph's own ``prune`` does.

:func:`thread_facts` gives no nodes when the thread is not for this path
(a parent link that does not resolve to an older checkpoint of its
namespace: the walk reports it), and :func:`needs_general_path` tells a
chain start that needs a rebase; the caller then takes the general path.
"""

from __future__ import annotations

import datetime as dt
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from deerflow.convert import backups
from deerflow.retention.plan import Node, Plan
from deerflow.runtime.delta_evidence import prune_refuses
from deerflow.storage.sessions import ConversionSession

__all__ = [
    "ThreadFacts",
    "backup_tables_committed",
    "backup_tables_known",
    "delete_planned",
    "garbage_blobs",
    "key_columns",
    "langgraph_reads_delta",
    "read_bytes_digest",
    "read_bytes_digests",
    "seeds",
    "stored_bytes",
    "stored_messages",
    "stores_none",
    "thread_facts",
]

_Key = tuple[str, str]
_BlobKey = tuple[str, str, str]

_CHECKPOINT_COLS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"
_BLOB_COLS = "thread_id, checkpoint_ns, channel, version, type, blob"
_IN_KEYS = "(checkpoint_ns, checkpoint_id) IN (SELECT * FROM unnest(?::text[], ?::text[]))"
_IN_BLOBS = "(checkpoint_ns, channel, version) IN (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]))"


def _nodes(rows: list[list[Any]], owners: set[_Key]) -> list[Node] | None:
    ids = {(ns, cid) for ns, cid, *_rest in rows}
    nodes = []
    for ns, cid, parent, metadata, versions in rows:
        if parent is not None and (parent >= cid or (ns, parent) not in ids):
            return None
        nodes.append(Node(ns, cid, parent, metadata or {}, versions or {}, (ns, cid) in owners))
    return nodes


@dataclass
class ThreadFacts:
    """What the set-based path reads of one thread in one statement.

    Attributes:
        count, newest: the watermark (checkpoint count, newest id).
        nodes: the plan's nodes (``None`` when a parent link does not name an older checkpoint of its namespace);
            ``[]`` when not asked for.
        owners: ``{(checkpoint_ns, checkpoint_id)}`` with writes rows.
        blob_keys: ``{(checkpoint_ns, channel, version)}`` of the thread's blobs.
        stored_bytes: bytes in LangGraph's three tables.
    """

    count: int
    newest: str | None
    nodes: list[Node] | None
    owners: set[_Key]
    blob_keys: set[_BlobKey]
    stored_bytes: int


def thread_facts(session: ConversionSession, thread_id: str, *, with_nodes: bool) -> ThreadFacts:
    """:class:`ThreadFacts` of one thread, in one statement (one round trip)."""
    d = session.dialect
    # json, not jsonb: the server only writes the documents out (building jsonb ones costs twice the read)
    nodes_sql = ("(SELECT json_agg(json_build_array(checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata, "
                 "checkpoint -> 'channel_versions')) FROM checkpoints WHERE thread_id = ?)") if with_nodes else "NULL"
    row = session.query(
        "SELECT (SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?) AS n, "
        "(SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ?) AS newest, "
        f"{nodes_sql} AS nodes, "
        "(SELECT json_agg(json_build_array(checkpoint_ns, checkpoint_id)) FROM (SELECT DISTINCT checkpoint_ns, "
        f"checkpoint_id FROM {d.writes_table} WHERE thread_id = ?) AS o) AS owners, "
        "(SELECT json_agg(json_build_array(checkpoint_ns, channel, version)) FROM checkpoint_blobs "
        "WHERE thread_id = ?) AS blobs, "
        f"(SELECT COALESCE(SUM({d.checkpoint_bytes(None)}), 0) FROM checkpoints WHERE thread_id = ?) + "
        f"(SELECT COALESCE(SUM({d.write_bytes(None)}), 0) FROM {d.writes_table} WHERE thread_id = ?) + "
        f"(SELECT COALESCE(SUM({d.blob_bytes()}), 0) FROM checkpoint_blobs WHERE thread_id = ?) AS b",
        [thread_id] * (8 if with_nodes else 7))[0]
    owners = {(ns, cid) for ns, cid in row["owners"] or []}
    nodes = _nodes(row["nodes"] or [], owners) if with_nodes else []
    return ThreadFacts(int(row["n"]), row["newest"], nodes, owners,
                       {(ns, ch, v) for ns, ch, v in row["blobs"] or []}, int(row["b"]))


def seeds(session: ConversionSession, thread_id: str, keys: Iterable[_Key]) -> set[_Key]:
    """The checkpoints among ``keys`` that store their own ``messages`` value (no ancestor needed to read it).

    A stored value is a ``messages`` blob of the checkpoint's version holding a value (a list, an
    ``Overwrite``, a ``_DeltaSnapshot``), not the saver's ``empty`` or ``null`` marker; a checkpoint
    without a ``messages`` version needs no seed. Read from the columns, no value decoded.
    """
    keys = sorted(keys)
    if not keys:
        return set()
    rows = session.query(
        "SELECT c.checkpoint_ns, c.checkpoint_id, c.checkpoint -> 'channel_versions' ->> 'messages' AS version, "
        "EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id "
        "AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = 'messages' "
        "AND b.version = c.checkpoint -> 'channel_versions' ->> 'messages' "
        "AND b.type NOT IN ('empty', 'null')) AS stored "
        f"FROM checkpoints c WHERE c.thread_id = ? AND {_IN_KEYS.replace('(checkpoint_ns', '(c.checkpoint_ns')}",
        [thread_id, [k[0] for k in keys], [k[1] for k in keys]])
    return {(r["checkpoint_ns"], r["checkpoint_id"]) for r in rows if r["version"] is None or r["stored"]}


def stored_messages(session: ConversionSession, thread_id: str, keys: Iterable[_Key]) -> dict[_Key, tuple[str, bytes]]:
    """``{key: (type, bytes)}``: the ``messages`` blob of each checkpoint's own ``messages`` version, as stored
    (keys without one are left out)."""
    keys = sorted(keys)
    if not keys:
        return {}
    rows = session.query(
        "SELECT c.checkpoint_ns, c.checkpoint_id, b.type, b.blob FROM checkpoints c JOIN checkpoint_blobs b "
        "ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = 'messages' "
        "AND b.version = c.checkpoint -> 'channel_versions' ->> 'messages' "
        f"WHERE c.thread_id = ? AND {_IN_KEYS.replace('(checkpoint_ns', '(c.checkpoint_ns')}",
        [thread_id, [k[0] for k in keys], [k[1] for k in keys]])
    return {(r["checkpoint_ns"], r["checkpoint_id"]): (r["type"], bytes(r["blob"])) for r in rows}


def stores_none(session: ConversionSession, thread_id: str) -> bool:
    """True when the thread stores a ``None`` as a ``messages`` value (inline in the checkpoint's
    ``channel_values``, where the Postgres saver keeps primitives, or a ``null`` blob): the savers read the
    checkpoints below it differently (LangGraph #8686), so no rebase value keeps both readings."""
    rows = session.query(
        "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ? "
        "AND checkpoint -> 'channel_values' -> 'messages' = 'null'::jsonb) "
        "OR EXISTS (SELECT 1 FROM checkpoint_blobs WHERE thread_id = ? AND channel = 'messages' "
        "AND type = 'null') AS found", [thread_id, thread_id])
    return bool(rows[0]["found"])


def key_columns(rows: Sequence[tuple[str, ...]], width: int = 3) -> list[list[str]]:
    """``rows`` (e.g. ``(thread_id, checkpoint_ns, checkpoint_id)`` keys) as ``width`` parallel lists, one array
    parameter each (for ``unnest(?::text[], ...)``)."""
    return [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


def langgraph_reads_delta(nodes: Iterable[Node]) -> bool:
    """True when a checkpoint's metadata makes the thread delta to LangGraph's reader and ``prune``: any
    ``DeltaChannel``'s counters or LangGraph.js's key (:data:`deerflow.runtime.delta_evidence.PRUNE_REFUSES`)."""
    return any(prune_refuses(n.metadata) for n in nodes)


def read_bytes_digest(session: ConversionSession, thread_id: str, nodes: Iterable[Node], kept: set[_Key],
                      skip_blobs: set[_BlobKey] = frozenset()) -> str:  # type: ignore[assignment]
    """A digest of every stored byte the kept checkpoints are read from.

    Their ``checkpoints`` rows without the parent link (type, checkpoint, metadata), the blobs their
    channel versions name (but ``skip_blobs``: ``(ns, channel, version)`` a rebase writes), and the writes
    rows stored under them. When it is unchanged and every chain start stores its own value, each kept
    checkpoint reads exactly as before.
    """
    return read_bytes_digests(session, {thread_id: (nodes, kept)}, skip_blobs)[thread_id]


def read_bytes_digests(session: ConversionSession, threads: dict[str, tuple[Iterable[Node], set[_Key]]],
                       skip_blobs: set[_BlobKey] = frozenset()) -> dict[str, str]:  # type: ignore[assignment]
    """:func:`read_bytes_digest` of several threads in one statement: ``{thread_id: digest}``."""
    keys = sorted((t, *k) for t, (_nodes, kept) in threads.items() for k in kept)
    blobs = sorted({(t, n.ns, channel, str(version)) for t, (nodes, kept) in threads.items() for n in nodes
                    if n.key in kept for channel, version in n.versions.items()
                    if (n.ns, channel, str(version)) not in skip_blobs})
    ck, bk = key_columns(keys), key_columns(blobs, 4)
    writes = session.dialect.writes_table
    in_keys = "(thread_id, checkpoint_ns, checkpoint_id) IN (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]))"
    rows = session.query(
        "SELECT thread_id, md5(string_agg(h, ',' ORDER BY h)) AS digest FROM ("
        "SELECT thread_id, md5(concat_ws('/', checkpoint_ns, checkpoint_id, type, checkpoint::text, "
        f"metadata::text)) AS h FROM checkpoints WHERE {in_keys} UNION ALL "
        "SELECT thread_id, md5(concat_ws('/', checkpoint_ns, channel, version, type, md5(blob))) "
        "FROM checkpoint_blobs WHERE (thread_id, checkpoint_ns, channel, version) IN "
        "(SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[])) UNION ALL "
        "SELECT thread_id, md5(concat_ws('/', checkpoint_ns, checkpoint_id, task_id, idx::text, channel, type, "
        f"md5(blob), task_path)) FROM {writes} WHERE {in_keys}) AS parts GROUP BY thread_id",
        [*ck, *bk, *ck])
    out = {t: "" for t in threads}
    out.update({r["thread_id"]: str(r["digest"]) for r in rows})
    return out


def garbage_blobs(nodes: Iterable[Node], plan: Plan, blob_keys: set[_BlobKey],
                  overrides: dict[_Key, dict[str, Any]] | None = None) -> set[_BlobKey]:
    """The blobs of ``blob_keys`` no kept checkpoint names: what the deleted checkpoints used and no kept one does
    (LangGraph ``prune``'s rule), and any blob no checkpoint names at all (no reader can reach it: a reader loads
    the blobs its checkpoint's ``channel_versions`` name). So a pruned thread holds only what its kept
    checkpoints read.

    ``overrides``: channel versions a kept checkpoint will have after the prune (a rebase's own version).
    """
    kept: set[_BlobKey] = set()
    for node in nodes:
        if node.key in plan.kept:
            versions = {**node.versions, **(overrides or {}).get(node.key, {})}
            kept.update((node.ns, channel, str(version)) for channel, version in versions.items())
    return blob_keys - kept


def delete_planned(session: ConversionSession, thread_id: str, plan: Plan, garbage: set[_BlobKey], *,
                   backup_id: str | None, note: str, size: int) -> None:
    """Delete the plan's checkpoints, their writes rows and ``garbage``; clear the chain starts' parent links.

    With ``backup_id``, every deleted row is moved into the backup tables by the statement that deletes
    it, and the rows kept are copied beside them (before any other change), so the backup is the whole
    thread (``size``: its bytes, recorded with it; ``note``: stored with it).
    """
    deleted = sorted(plan.deleted)
    keys = [[k[0] for k in deleted], [k[1] for k in deleted]]
    blobs = sorted(garbage)
    blob_keys = [[b[0] for b in blobs], [b[1] for b in blobs], [b[2] for b in blobs]]
    writes, cols = session.dialect.writes_table, session.dialect.write_columns
    statements = [
        (writes, cols, _IN_KEYS, keys, "dfa_backup_writes"),
        ("checkpoints", _CHECKPOINT_COLS, _IN_KEYS, keys, "dfa_backup_checkpoints"),
        ("checkpoint_blobs", _BLOB_COLS, _IN_BLOBS, blob_keys, "dfa_backup_blobs"),
    ]
    if backup_id is None:
        for table, _cols, in_keys, params, _into in statements:
            if params[0]:
                session.execute(f"DELETE FROM {table} WHERE thread_id = ? AND {in_keys}", [thread_id, *params])
    else:
        _move(session, thread_id, statements, backup_id, note, size)
    starts = sorted(plan.chain_starts)
    if starts:
        session.execute(f"UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? AND {_IN_KEYS}",
                        [thread_id, [k[0] for k in starts], [k[1] for k in starts]])


#: Connections that committed a transaction with the backup tables (asked once per connection, not per thread).
_HAS_BACKUP_TABLES: weakref.WeakSet[Any] = weakref.WeakSet()


def backup_tables_known(session: ConversionSession) -> bool:
    """Whether the session's connection already committed with the backup tables present (no DDL needed)."""
    return session.conn in _HAS_BACKUP_TABLES


def backup_tables_committed(session: ConversionSession) -> None:
    """Record that the session's connection committed with the backup tables present (after a backup's commit)."""
    _HAS_BACKUP_TABLES.add(session.conn)


def stored_bytes(session: ConversionSession, thread_id: str) -> int:
    """Bytes of the thread in LangGraph's three tables, in one statement (as ``ConversionSession.stored_bytes``)."""
    d = session.dialect
    return int(session.query(
        f"SELECT (SELECT COALESCE(SUM({d.checkpoint_bytes(None)}), 0) FROM checkpoints WHERE thread_id = ?) + "
        f"(SELECT COALESCE(SUM({d.write_bytes(None)}), 0) FROM {d.writes_table} WHERE thread_id = ?) + "
        f"(SELECT COALESCE(SUM({d.blob_bytes()}), 0) FROM checkpoint_blobs WHERE thread_id = ?) AS b",
        [thread_id] * 3)[0]["b"])


def _move(session: ConversionSession, thread_id: str, statements: list[tuple[str, str, str, list[Any], str]],
          backup_id: str, note: str, size: int) -> None:
    """Move the deleted rows into the backup and copy the kept ones beside them: one statement per table (the
    copy reads the statement's snapshot, before its delete), and one for the backup's record."""
    if not backup_tables_known(session):
        backups.ensure_whole_thread_tables(session)
    counts = {}
    for table, cols, in_keys, params, into in statements:
        if not params[0]:
            counts[table] = session.execute(f"INSERT INTO {into} (backup_id, {cols}) SELECT ?, {cols} FROM {table} "
                                            "WHERE thread_id = ?", [backup_id, thread_id])
            continue
        counts[table] = session.execute(
            f"WITH d AS (DELETE FROM {table} WHERE thread_id = ? AND {in_keys} RETURNING {cols}) "
            f"INSERT INTO {into} (backup_id, {cols}) SELECT ?, {cols} FROM d "
            f"UNION ALL SELECT ?, {cols} FROM {table} WHERE thread_id = ? AND NOT {in_keys}",
            [thread_id, *params, backup_id, backup_id, thread_id, *params])
    created = dt.datetime.now(dt.UTC).isoformat()
    others = sum(n for table, n in counts.items() if table != "checkpoints")
    session.execute(
        "WITH b AS (INSERT INTO dfa_backups (backup_id, thread_id, created_at, checkpoint_rows, blob_rows, bytes, "
        "status, note) VALUES (?, ?, ?, ?, ?, ?, 'active', ?) RETURNING backup_id) "
        "INSERT INTO dfa_backup_scopes (backup_id, scope) SELECT backup_id, 'thread' FROM b",
        [backup_id, thread_id, created, counts["checkpoints"], others, size, note])
