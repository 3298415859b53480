"""``threads_meta`` read for the thread list: rows by id, the list's owner, title and orphan conditions."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from deerflow.dialect import Dialect
from deerflow.storage.deerflow_tables.schema import (
    MAX_OWNER_LENGTH,
    META_COLUMNS,
    Presence,
    presence,
    select_columns,
    stored_text,
    stored_time,
)
from deerflow.thread_summary import ThreadSummary


@dataclass(frozen=True)
class ThreadMeta:
    """One ``threads_meta`` row.

    Attributes:
        thread_id: the LangGraph thread id.
        title: ``display_name`` (the title DeerFlow's UI shows), or ``None``.
        owner: ``user_id`` (DeerFlow's user id), or ``None``.
        status: DeerFlow's thread status (``idle``, ``running``, ``error``, ``interrupted``), or ``None``.
        assistant_id: the assistant (graph) id, or ``None``.
        created_at, updated_at: UTC, or ``None`` when missing or unreadable.
    """

    thread_id: str
    title: str | None
    owner: str | None
    status: str | None
    assistant_id: str | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None


def meta_of(row: dict[str, Any]) -> ThreadMeta:
    """A :class:`ThreadMeta` from a row selected with :data:`META_COLUMNS`."""
    return ThreadMeta(thread_id=str(row["thread_id"]), title=stored_text(row["display_name"]),
                      owner=stored_text(row["user_id"]), status=stored_text(row["status"]),
                      assistant_id=stored_text(row["assistant_id"]),
                      created_at=stored_time(row["created_at"]), updated_at=stored_time(row["updated_at"]))


#: Ids per ``IN (...)`` (below SQLite's bound on host parameters).
CHUNK = 500


def thread_meta(db: Any, thread_ids: list[str], *, tables: Presence | None = None) -> dict[str, ThreadMeta]:
    """The ``threads_meta`` rows of ``thread_ids`` (primary-key lookups), by thread id.

    Args:
        db: a reader or transaction on the checkpoint database.
        thread_ids: the threads (any number; looked up 500 at a time).
        tables: :func:`presence`'s answer, if the caller has it.

    Returns:
        ``{thread_id: ThreadMeta}`` for the ids that have a row; ``{}`` without the table.
    """
    tables = presence(db) if tables is None else tables
    if not tables.has_threads_meta or not thread_ids:
        return {}
    out: dict[str, ThreadMeta] = {}
    for i in range(0, len(thread_ids), CHUNK):
        chunk = thread_ids[i:i + CHUNK]
        condition, params = Dialect(db.dialect).in_list("thread_id", chunk)
        for row in db.query(f"SELECT {select_columns(tables.threads_meta, META_COLUMNS)} FROM threads_meta "
                            f"WHERE {condition}", params):
            meta = meta_of(row)
            out[meta.thread_id] = meta
    return out


def annotate(db: Any, threads: list[ThreadSummary], *, tables: Presence | None = None) -> list[ThreadSummary]:
    """``threads`` with DeerFlow's ``title``, ``owner`` and ``deerflow_thread`` filled in (one lookup).

    Returns:
        New rows (same order); without ``threads_meta`` every ``deerflow_thread`` stays ``None``.
    """
    tables = presence(db) if tables is None else tables
    if not tables.has_threads_meta or not threads:
        return threads
    found = thread_meta(db, [t.thread_id for t in threads], tables=tables)
    return [replace(t, title=m.title, owner=m.owner, deerflow_thread=True) if (m := found.get(t.thread_id))
            else replace(t, title=None, owner=None, deerflow_thread=False) for t in threads]


def validate_owner(owner: str) -> str:
    """An owner filter value (``threads_meta.user_id``), checked.

    Returns:
        ``owner`` unchanged.

    Raises:
        ValueError: empty, longer than :data:`MAX_OWNER_LENGTH` characters (DeerFlow's ``VARCHAR(64)``), or
            holding a control character (no DeerFlow user id does; Postgres refuses NUL).
    """
    if not owner:
        raise ValueError("owner must not be empty")
    if len(owner) > MAX_OWNER_LENGTH:
        raise ValueError(f"owner has {len(owner)} characters; DeerFlow's user ids have at most {MAX_OWNER_LENGTH}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in owner):
        raise ValueError("owner must not contain control characters")
    return owner


def list_conditions(db: Any, tables: Presence, *, owner: str | None = None, q: str | None = None,
                    orphaned_before: str | None = None, orphaned: bool = False,
                    table: str = "dfa_thread_summary") -> tuple[list[str], list[Any]]:
    """``(conditions, params)`` over a table of threads (``thread_id``, ``last_checkpoint_id``) for the list.

    Args:
        db: the reader (its dialect's substring fragment).
        tables: :func:`presence`'s answer.
        owner: only threads whose ``threads_meta.user_id`` is exactly this (checked by the caller).
        q: a literal substring, ignoring case, of the thread id **or** its title.
        orphaned: only orphans: no ``threads_meta`` row and ``last_checkpoint_id < orphaned_before``
            (``orphaned_before`` ``None``: no thread is idle that long).
        table: the outer table's name, for the correlated subqueries.

    Returns:
        Conditions to ``AND`` with the list's own (``?`` placeholders) and their parameters. Without
        ``threads_meta`` an owner or orphan filter matches nothing (no thread has an owner, no thread can be
        called an orphan) and ``q`` matches ids only.
    """
    where: list[str] = []
    params: list[Any] = []
    has_meta = tables.has_threads_meta
    if owner is not None:
        if not has_meta:
            return ["1 = 0"], []
        where.append("thread_id IN (SELECT m.thread_id FROM threads_meta m WHERE m.user_id = ?)")
        params.append(owner)
    if q:
        if has_meta:
            where.append(f"({db.contains('thread_id')} OR EXISTS (SELECT 1 FROM threads_meta m "
                         f"WHERE m.thread_id = {table}.thread_id AND {db.contains('m.display_name')}))")
            params += [q, q]
        else:
            where.append(db.contains("thread_id"))
            params.append(q)
    if orphaned:
        if not has_meta or orphaned_before is None:
            return ["1 = 0"], []
        where.append(f"NOT EXISTS (SELECT 1 FROM threads_meta m WHERE m.thread_id = {table}.thread_id) "
                     "AND last_checkpoint_id < ?")
        params.append(orphaned_before)
    return where, params


def live_filter(db: Any, tables: Presence, *, q: str | None = None, owner: str | None = None,
                orphaned: bool = False, orphaned_before: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """:func:`list_conditions` as a predicate over rows aggregated live (``thread_id``, ``last_checkpoint_id``).

    For a role that cannot read the thread summary: reads every ``threads_meta`` row's id, title and owner
    once (the live list aggregates every checkpoint anyway). ``q`` matches ignoring case (Python's
    ``casefold``), ``owner`` exactly.

    Returns:
        ``keep(row) -> bool``.
    """
    if not tables.has_threads_meta:
        return lambda row: False
    title = "display_name" if "display_name" in tables.threads_meta else "NULL"
    user = "user_id" if "user_id" in tables.threads_meta else "NULL"
    meta = {str(r["thread_id"]): (stored_text(r["title"]), stored_text(r["owner"]))
            for r in db.query(f"SELECT thread_id, {title} AS title, {user} AS owner FROM threads_meta")}
    needle = q.casefold() if q else None

    def keep(row: dict[str, Any]) -> bool:
        found = meta.get(str(row["thread_id"]))
        if owner is not None and (found is None or found[1] != owner):
            return False
        if needle and needle not in str(row["thread_id"]).casefold() and not (
                found and found[0] and needle in found[0].casefold()):
            return False
        if orphaned and (found is not None or orphaned_before is None
                         or not str(row["last_checkpoint_id"] or "") < orphaned_before):
            return False
        return True

    return keep
