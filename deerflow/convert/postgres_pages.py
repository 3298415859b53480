"""Postgres: pages of checkpoints as ``PostgresSaver.list`` returns them, read without its array aggregates.

LangGraph's ``PostgresSaver.list`` selects each checkpoint with its blobs and
pending writes packed by ``array_agg(array[...])`` on the server. For a
full-mode thread, where every checkpoint's ``messages`` blob is the whole list,
building those arrays costs the server about three times reading the rows
themselves (measured 2026-12-05 on a 1,000-turn full thread, 497 MB of
``messages`` blobs: the list query 3.25 s, the same blobs selected plainly
0.83 s). :func:`iter_postgres_checkpoints` reads each page with three plain
statements (the checkpoint rows with their ``channel_versions`` in
``jsonb_each_text`` order; the distinct blobs those versions name; the
pending writes) and hands the rows, in the shapes LangGraph's own query gives
them, to the saver's own row loader, so the tuples are the saver's (its
serializer, its blob and write decoding and ordering). A page holding a
checkpoint older than LangGraph's checkpoint format 4 (whose pending sends
LangGraph migrates while listing) is read through ``saver.list`` itself.

Used through :func:`deerflow.convert.reading.iter_session_checkpoints` by the
compactor's walk (:class:`deerflow.convert.walk.Walk` with ``full_storage``)
and its verification's replay of LangGraph's read rule; the real reads at
heads and seams stay LangGraph's own.

Consistency: in a write session (``READ COMMITTED``) each statement sees the
rows committed before it, as each of LangGraph's pages does. Between a page's
statements a live writer can only add rows (a new checkpoint, its blobs at new
versions, pending writes of the head); stored blobs are never rewritten. A
checkpoint added meanwhile changes the thread's watermark, which the jobs
compare before commit (:func:`deerflow.convert.walk.check_watermark`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg.rows import dict_row

__all__ = ["iter_postgres_checkpoints"]

_ROWS = """
SELECT thread_id, checkpoint, checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata,
       (SELECT array_agg(array[v.key, v.value] ORDER BY v.n)
        FROM jsonb_each_text(checkpoint -> 'channel_versions') WITH ORDINALITY AS v(key, value, n)) AS versions
FROM checkpoints
WHERE thread_id = %s AND checkpoint_ns = %s {before}
ORDER BY checkpoint_id DESC LIMIT %s"""

_BLOBS = """
SELECT channel, version, type, blob FROM checkpoint_blobs
WHERE thread_id = %s AND checkpoint_ns = %s
  AND (channel, version) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"""

_WRITES = """
SELECT checkpoint_id, task_id, channel, type, blob, task_path, idx FROM checkpoint_writes
WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)
ORDER BY checkpoint_id, task_id, idx"""

#: LangGraph's checkpoint format from which ``list`` no longer migrates pending sends.
_SENDS_MIGRATED_FROM = 4


def _utf8(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def _page(cur: Any, thread_id: str, checkpoint_ns: str, before: str | None, limit: int) -> list[dict[str, Any]]:
    """One page of rows shaped as LangGraph's list query returns them (``channel_values``, ``pending_writes``)."""
    cur.execute(_ROWS.format(before="AND checkpoint_id < %s" if before else ""),
                [thread_id, checkpoint_ns, *([before] if before else []), limit])
    rows = cur.fetchall()
    if not rows:
        return rows
    named = {row["checkpoint_id"]: [(k, v) for k, v in row.pop("versions") or [] if v is not None] for row in rows}
    wanted = sorted({pair for pairs in named.values() for pair in pairs})
    blobs: dict[tuple[str, str], list[bytes | None]] = {}
    if wanted:
        cur.execute(_BLOBS, [thread_id, checkpoint_ns, [k for k, _ in wanted], [v for _, v in wanted]])
        for b in cur.fetchall():
            blobs[(b["channel"], b["version"])] = [b["channel"].encode(), _utf8(b["type"]), b["blob"]]
    cur.execute(_WRITES, [thread_id, checkpoint_ns, list(named)])
    writes: dict[str, list[list[bytes | None]]] = {}
    for w in cur.fetchall():
        writes.setdefault(w["checkpoint_id"], []).append(
            [w["task_id"].encode(), w["channel"].encode(), _utf8(w["type"]), w["blob"], _utf8(w["task_path"]),
             str(w["idx"]).encode()])
    for row in rows:
        cid = row["checkpoint_id"]
        # array_agg over no rows is NULL: a checkpoint without blobs or writes gets None, as from LangGraph's query
        row["channel_values"] = [blobs[pair] for pair in named[cid] if pair in blobs] or None
        row["pending_writes"] = writes.get(cid)
    return rows


def iter_postgres_checkpoints(saver: Any, conn: Any, thread_id: str, checkpoint_ns: str, *,
                              page_size: int) -> Iterator[Any]:
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
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}}
    before: str | None = None
    while True:
        with conn.cursor(binary=True, row_factory=dict_row) as cur:
            rows = _page(cur, thread_id, checkpoint_ns, before, page_size)
        if any(row["checkpoint"].get("v", 0) < _SENDS_MIGRATED_FROM and row["parent_checkpoint_id"] for row in rows):
            # LangGraph migrates these checkpoints' pending sends while listing: let it read this page
            after = {"configurable": {"checkpoint_id": before}} if before else None
            tuples = list(saver.list(config, before=after, limit=page_size))
        else:
            tuples = [saver._load_checkpoint_tuple(row) for row in rows]  # noqa: SLF001 - the saver's own loader
        yield from tuples
        if len(rows) < page_size:
            return
        before = rows[-1]["checkpoint_id"]
