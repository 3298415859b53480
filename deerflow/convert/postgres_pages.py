"""Postgres: pages of checkpoints as ``PostgresSaver.list`` returns them, read without its array aggregates.

LangGraph's ``PostgresSaver.list`` selects each checkpoint with its blobs and
pending writes packed by ``array_agg(array[...])`` on the server (one array
per checkpoint, each blob copied into it again for every checkpoint naming it). For a
full-mode thread, where every checkpoint's ``messages`` blob is the whole list,
building those arrays costs the server several times reading the rows
themselves (``docs/scale.md`` has the figures). :func:`iter_postgres_checkpoints` reads each page with one statement
returning plain rows (the checkpoint rows with their ``channel_versions`` in
``jsonb_each_text`` order; the distinct blobs those versions name, once each;
the pending writes), with every name cast to ``bytea`` as LangGraph's query
casts it, and hands them, in the shapes LangGraph's own query gives them, to
the saver's own row loader, so the tuples are the saver's (its serializer, its
blob and write decoding and ordering). A page holding a checkpoint older than
LangGraph's checkpoint format 4 (whose pending sends LangGraph migrates while
listing) or with no format number is listed by ``saver.list`` itself.

Used through :func:`deerflow.convert.reading.iter_session_checkpoints` by the
compactor's walk (:class:`deerflow.convert.walk.Walk` with ``full_storage``)
and its verification's replay of LangGraph's read rule; the real reads at
heads and seams stay LangGraph's own.

Consistency: each page is one statement, so it reads one snapshot, as each
of LangGraph's list calls does (in a write session, ``READ COMMITTED``, pages
read one after another may see a live writer's newer rows, as LangGraph's
pages do; the jobs compare the thread's watermark before commit:
:func:`deerflow.convert.walk.check_watermark`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from deerflow.storage.addressing import config_for

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import CheckpointTuple
    from langgraph.checkpoint.postgres import PostgresSaver

__all__ = ["iter_postgres_checkpoints"]

#: One page in one statement, so one snapshot (as LangGraph's one list query): the checkpoint rows (kind ``c``)
#: with their ``channel_versions`` pairs in ``jsonb_each_text`` order, the distinct blobs those pairs name (``b``)
#: and the pages' pending writes (``w``). Names are cast to ``bytea`` exactly as LangGraph's query casts them.
_PAGE = """
WITH page AS MATERIALIZED (
    SELECT thread_id, checkpoint, checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata
    FROM checkpoints
    WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s {before}
    ORDER BY checkpoint_id DESC LIMIT %(limit)s
), named AS MATERIALIZED (
    SELECT DISTINCT v.key, v.value
    FROM page CROSS JOIN LATERAL jsonb_each_text(page.checkpoint -> 'channel_versions') AS v(key, value)
)
SELECT 'c' AS kind, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
       (SELECT array_agg(array[v.key, v.value] ORDER BY v.n)
        FROM jsonb_each_text(checkpoint -> 'channel_versions') WITH ORDINALITY AS v(key, value, n)) AS versions,
       NULL::text AS channel, NULL::text AS version, NULL::bytea AS channel_b, NULL::bytea AS type_b,
       NULL::bytea AS blob, NULL::bytea AS task_id_b, NULL::bytea AS task_path_b, NULL::bytea AS idx_b
FROM page
UNION ALL
SELECT 'b', NULL, NULL, NULL, NULL, NULL, bl.channel, bl.version, bl.channel::bytea, bl.type::bytea, bl.blob,
       NULL, NULL, NULL
FROM named CROSS JOIN LATERAL (
    -- one primary-key lookup per named version (LIMIT 1 keeps the planner from a scan of the thread's blobs)
    SELECT channel, version, type, blob FROM checkpoint_blobs
    WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s
      AND channel = named.key AND version = named.value
    LIMIT 1) AS bl
UNION ALL
SELECT 'w', cw.checkpoint_id, NULL, NULL, NULL, NULL, NULL, NULL, cw.channel::bytea, cw.type::bytea, cw.blob,
       cw.task_id::text::bytea, convert_to(cw.task_path, 'UTF8'), cw.idx::text::bytea
FROM checkpoint_writes cw JOIN page ON cw.checkpoint_id = page.checkpoint_id
WHERE cw.thread_id = %(thread_id)s AND cw.checkpoint_ns = %(checkpoint_ns)s
ORDER BY kind, checkpoint_id DESC"""

#: LangGraph's checkpoint format from which ``list`` no longer migrates pending sends.
_SENDS_MIGRATED_FROM = 4


def _page(cur: Any, thread_id: str, checkpoint_ns: str, before: str | None, limit: int) -> list[dict[str, Any]]:
    """One page of rows shaped as LangGraph's list query returns them, newest first.

    Each row: ``thread_id``, ``checkpoint``, ``checkpoint_ns``, ``checkpoint_id``,
    ``parent_checkpoint_id``, ``metadata``, ``channel_values`` (``[[channel, type, blob]]``
    bytes, or None) and ``pending_writes`` (``[[task_id, channel, type, blob, task_path, idx]]``
    bytes, or None), as the saver's ``_load_checkpoint_tuple`` takes them.
    """
    params = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "limit": limit, "before": before}
    # not prepared: a generic plan of the array and join parameters can be far worse (LangGraph's own list
    # statements run unprepared for the same reason)
    cur.execute(_PAGE.format(before="AND checkpoint_id < %(before)s" if before else ""), params, prepare=False)
    rows: list[dict[str, Any]] = []  # newest first, in the database's order (its collation), as LangGraph's
    blobs: dict[tuple[str, str], list[bytes | None]] = {}
    writes: dict[str, list[list[bytes | None]]] = {}
    for r in cur.fetchall():
        if r["kind"] == "c":
            rows.append(r)
        elif r["kind"] == "b":
            blobs[(r["channel"], r["version"])] = [r["channel_b"], r["type_b"], r["blob"]]
        else:
            writes.setdefault(r["checkpoint_id"], []).append(
                [r["task_id_b"], r["channel_b"], r["type_b"], r["blob"], r["task_path_b"], r["idx_b"]])
    out = []
    for r in rows:
        pairs = [(k, v) for k, v in r["versions"] or [] if v is not None]
        out.append({
            "thread_id": thread_id, "checkpoint": r["checkpoint"], "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": r["checkpoint_id"], "parent_checkpoint_id": r["parent_checkpoint_id"],
            "metadata": r["metadata"],
            # array_agg over no rows is NULL: no blobs or no writes give None, as LangGraph's query does
            "channel_values": [blobs[pair] for pair in pairs if pair in blobs] or None,
            "pending_writes": writes.get(r["checkpoint_id"]),
        })
    return out


def _listed_by_langgraph(checkpoint: dict[str, Any], parent: str | None) -> bool:
    """True where LangGraph's ``list`` does more than load the row: it migrates the pending sends of a
    checkpoint older than format 4 with a parent (and fails on a checkpoint with no format number)."""
    version = checkpoint.get("v")
    if not isinstance(version, int | float):
        return True
    return version < _SENDS_MIGRATED_FROM and parent is not None


def iter_postgres_checkpoints(saver: PostgresSaver, conn: Any, thread_id: str, checkpoint_ns: str, *,
                              page_size: int) -> Iterator[CheckpointTuple]:
    """Every ``CheckpointTuple`` of one ``(thread_id, checkpoint_ns)``, newest first, as ``saver.list`` gives them.

    Args:
        saver: a ``PostgresSaver`` whose connection is ``conn`` (its serializer and row loader build the tuples).
        conn: the psycopg connection (and transaction) to read on.
        thread_id: the thread.
        checkpoint_ns: the namespace (``""`` for the root graph).
        page_size: checkpoints per page (count, >= 1).

    Yields:
        ``CheckpointTuple`` s equal to ``saver.list``'s (config, checkpoint, metadata, parent config,
        pending writes in LangGraph's order).

    Raises:
        ValueError: ``page_size`` below 1.
        psycopg.Error: as the statements raise it (the caller's session translates driver errors).
    """
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    config = config_for(thread_id, checkpoint_ns)
    before: str | None = None
    while True:
        with conn.cursor(binary=True, row_factory=dict_row) as cur:
            rows = _page(cur, thread_id, checkpoint_ns, before, page_size)
        if any(_listed_by_langgraph(r["checkpoint"], r["parent_checkpoint_id"]) for r in rows):
            # let LangGraph list this page itself (its own snapshot: the next page starts after what it gave)
            after: RunnableConfig | None = {"configurable": {"checkpoint_id": before}} if before else None
            tuples = list(saver.list(config, before=after, limit=page_size))
            yield from tuples
            if len(tuples) < page_size:
                return
            before = tuples[-1].config["configurable"]["checkpoint_id"]
            continue
        yield from (saver._load_checkpoint_tuple(r) for r in rows)  # noqa: SLF001 - the saver's own loader
        if len(rows) < page_size:
            return
        before = rows[-1]["checkpoint_id"]
