"""Find a thread's stored checkpoint data that LangGraph's serializer cannot decode.

A damaged row (a truncated or overwritten blob) makes LangGraph's readers
fail with whatever the decoder raises (``ValueError: invalid type
Reserved``, ``TypeError``, ...), which says nothing about where the damage
is. :func:`find_undecodable` decodes every stored value of one thread with
the saver's own ``serde``, exactly as the saver would, and reports each one
that fails: which checkpoint, which part (the checkpoint itself, a pending
write, a channel blob) and why. Nothing is written.

Layouts (LangGraph's): SQLite ``checkpoints.checkpoint`` (typed blob) and
``writes.value``; Postgres ``checkpoints.checkpoint`` (JSONB, decoded by the
database), ``checkpoint_blobs.blob`` (per channel version, attributed to the
checkpoints whose ``channel_versions`` name it) and ``checkpoint_writes.blob``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from deerflow.errors import CheckpointDecodeError
from deerflow.storage.dialect import Dialect

__all__ = ["Undecodable", "decode_error_for", "find_undecodable"]


@dataclass(frozen=True)
class Undecodable:
    """One stored value that does not decode.

    Attributes:
        thread_id, checkpoint_ns, checkpoint_id: the checkpoint it belongs to.
        part: ``"checkpoint"``, ``"write <channel> (task <task_id>, idx <idx>)"`` or
            ``"channel <channel> version <version>"``.
        reason: the decoder's complaint, one line.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    part: str
    reason: str


def _reason(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _decodes(serde: Any, type_: str | None, blob: bytes | None, *, checkpoint: bool = False) -> str | None:
    """``None`` when ``(type_, blob)`` decodes (to a checkpoint dict if ``checkpoint``), else why not."""
    try:
        value = serde.loads_typed((type_, blob))
    except Exception as exc:  # whatever the decoder raises is the finding
        return _reason(exc)
    if checkpoint and not (isinstance(value, dict) and isinstance(value.get("channel_values", {}), dict)):
        return f"decodes to {type(value).__name__}, not a checkpoint"
    return None


def _rows(conn: Any, sql: str, params: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    dialect = Dialect.of_connection(conn)
    if dialect is Dialect.SQLITE:
        yield from conn.execute(sql, params)
        return
    with conn.cursor() as cur:
        cur.execute(dialect.sql(sql), params)
        for row in cur:
            yield tuple(row.values()) if isinstance(row, dict) else tuple(row)


def _sqlite(saver: Any, thread_id: str) -> Iterator[Undecodable]:
    serde, conn = saver.serde, saver.conn
    with saver.lock:
        checkpoints = list(_rows(conn, "SELECT checkpoint_ns, checkpoint_id, type, checkpoint FROM checkpoints "
                                       "WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id", (thread_id,)))
        writes = list(_rows(conn, "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value FROM writes "
                                  "WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id, task_id, idx",
                            (thread_id,)))
    for ns, cid, type_, blob in checkpoints:
        if (why := _decodes(serde, type_, blob, checkpoint=True)) is not None:
            yield Undecodable(thread_id, ns, cid, "checkpoint", why)
    for ns, cid, task_id, idx, channel, type_, blob in writes:
        if (why := _decodes(serde, type_, blob)) is not None:
            yield Undecodable(thread_id, ns, cid, f"write {channel} (task {task_id}, idx {idx})", why)


def _postgres(saver: Any, thread_id: str) -> Iterator[Undecodable]:
    serde = saver.serde
    blob_sql = """
        SELECT b.checkpoint_ns, b.channel, b.version, b.type, b.blob,
               (SELECT MIN(c.checkpoint_id) FROM checkpoints c
                 WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
                   AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version) AS first_checkpoint_id
        FROM checkpoint_blobs b WHERE b.thread_id = ? AND b.type <> 'empty'
        ORDER BY b.checkpoint_ns, b.channel, b.version"""
    write_sql = ("SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob FROM checkpoint_writes "
                 "WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id, task_id, idx")
    with saver._cursor() as cur:  # the saver's own connection handling (pool or connection)
        conn = cur.connection
        blobs = list(_rows(conn, blob_sql, (thread_id,)))
        writes = list(_rows(conn, write_sql, (thread_id,)))
    for ns, channel, version, type_, blob, first in blobs:
        if (why := _decodes(serde, type_, bytes(blob) if blob is not None else None)) is not None:
            yield Undecodable(thread_id, ns, first or "(no checkpoint references it)",
                              f"channel {channel} version {version}", why)
    for ns, cid, task_id, idx, channel, type_, blob in writes:
        if (why := _decodes(serde, type_, bytes(blob) if blob is not None else None)) is not None:
            yield Undecodable(thread_id, ns, cid, f"write {channel} (task {task_id}, idx {idx})", why)


def find_undecodable(saver: Any, thread_id: str, *, limit: int = 20) -> list[Undecodable]:
    """Every stored value of ``thread_id`` that the saver's serializer cannot decode (at most ``limit``).

    Args:
        saver: a LangGraph ``SqliteSaver`` or ``PostgresSaver`` (an ``InMemorySaver``
            keeps decoded objects: nothing to check, returns ``[]``).

    Returns:
        Findings ordered by namespace and checkpoint id.
    """
    dialect = Dialect.of_saver(saver)
    if dialect is None:
        return []
    found = _postgres(saver, thread_id) if dialect.has_blob_table else _sqlite(saver, thread_id)
    out: list[Undecodable] = []
    for item in found:
        out.append(item)
        if len(out) >= limit:
            break
    return out


def decode_error_for(saver: Any, thread_id: str) -> CheckpointDecodeError | None:
    """A :class:`CheckpointDecodeError` naming the thread's first undecodable value, or ``None`` if all decode."""
    found = find_undecodable(saver, thread_id, limit=20)
    if not found:
        return None
    first = found[0]
    return CheckpointDecodeError(thread_id, first.checkpoint_id, first.checkpoint_ns, part=first.part,
                                 reason=first.reason, more=len(found) - 1)
