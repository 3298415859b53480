"""The row operations of a prune, on a SQL session or on LangGraph's ``InMemorySaver``.

Retention reads through the saver (``list``) and the one-pass walk; what it
changes it changes here, inside one transaction per thread:

* :class:`SqlStore` -- a :class:`~deerflow.storage.sessions.ConversionSession`
  (SQLite or Postgres; the same per-thread lock and watermark as conversion).
  Deletes follow LangGraph's ``prune``: writes rows go by the checkpoints
  deleted (a run may save a superstep's writes before its checkpoint, so
  writes of unknown checkpoints are left alone), blobs go when a deleted
  checkpoint used them and no kept one does.
* :class:`MemoryStore` -- an ``InMemorySaver``: its dictionaries, with a copy
  of the thread's entries as the transaction (rolled back by putting the copy
  back) and a per-saver lock. Nothing persists, so no backups.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Iterable
from typing import Any

from deerflow.storage.sessions import ConversionSession

__all__ = ["MemorySession", "MemoryStore", "SqlStore"]

_Key = tuple[str, str]



class SqlStore:
    """Row operations of one thread's prune on a SQL session (``?`` placeholders, both dialects).

    Args:
        session: an open write session (``open_session(database)``).
    """

    persistent = True

    def __init__(self, session: ConversionSession):
        self.session = session
        self.dialect = session.dialect
        self.saver = session.saver
        #: True when one blob row per ``(namespace, channel, version)`` is shared (Postgres), not inline (SQLite).
        self.shared_versions = self.dialect.has_blob_table

    def writes_owners(self, thread_id: str) -> set[_Key]:
        """Checkpoints with writes rows stored under them: ``{(checkpoint_ns, checkpoint_id)}``."""
        rows = self.session.query(f"SELECT DISTINCT checkpoint_ns, checkpoint_id FROM {self.dialect.writes_table} "
                                  "WHERE thread_id = ?", [thread_id])
        return {(r["checkpoint_ns"], r["checkpoint_id"]) for r in rows}

    def raw_metadata(self, thread_id: str, key: _Key) -> Any:
        """The stored ``metadata`` column of one checkpoint, as the driver returns it."""
        return self.session.query("SELECT metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
                                  "AND checkpoint_id = ?", [thread_id, *key])[0]["metadata"]

    def finish_rebase(self, thread_id: str, key: _Key, metadata: Any) -> None:
        """After the rebase ``put``: parent link cleared, the original metadata column put back unchanged."""
        self.session.execute("UPDATE checkpoints SET parent_checkpoint_id = NULL, metadata = ? WHERE thread_id = ? "
                             "AND checkpoint_ns = ? AND checkpoint_id = ?",
                             [self.dialect.json_param(metadata), thread_id, *key])

    def blob_keys(self, thread_id: str) -> set[tuple[str, str, str]]:
        """``{(checkpoint_ns, channel, version)}`` of the thread's stored blobs (Postgres; empty on SQLite)."""
        if not self.dialect.has_blob_table:
            return set()
        rows = self.session.query("SELECT checkpoint_ns, channel, version FROM checkpoint_blobs WHERE thread_id = ?",
                                  [thread_id])
        return {(r["checkpoint_ns"], r["channel"], r["version"]) for r in rows}

    def delete(self, thread_id: str, deleted: set[_Key], garbage: set[tuple[str, str, str]],
               clear: Iterable[_Key]) -> None:
        """Delete checkpoints, their writes rows and garbage blobs; clear parent links of ``clear``."""
        by_ns: dict[str, list[str]] = {}
        for ns, cid in deleted:
            by_ns.setdefault(ns, []).append(cid)
        table = self.dialect.writes_table
        for ns, ids in by_ns.items():
            for chunk in _chunks(sorted(ids)):
                marks = ", ".join("?" * len(chunk))
                for t in (table, "checkpoints"):
                    self.session.execute(f"DELETE FROM {t} WHERE thread_id = ? AND checkpoint_ns = ? "
                                         f"AND checkpoint_id IN ({marks})", [thread_id, ns, *chunk])
        for ns, channel, version in sorted(garbage):
            self.session.execute("DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                                 "AND channel = ? AND version = ?", [thread_id, ns, channel, version])
        for ns, cid in clear:
            self.session.execute("UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? "
                                 "AND checkpoint_ns = ? AND checkpoint_id = ?", [thread_id, ns, cid])

    def sizes(self, thread_id: str) -> tuple[dict[_Key, int], dict[_Key, int], dict[tuple[str, str, str], int]]:
        """Stored bytes per checkpoint row, per checkpoint's writes rows, and per blob (Postgres)."""
        rows = self.session.checkpoint_row_sizes(thread_id)
        writes = {(r["checkpoint_ns"], r["checkpoint_id"]): int(r["b"] or 0) for r in self.session.query(
            f"SELECT checkpoint_ns, checkpoint_id, SUM({self.dialect.write_bytes(None)}) AS b "
            f"FROM {self.dialect.writes_table} WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id", [thread_id])}
        blobs: dict[tuple[str, str, str], int] = {}
        if self.dialect.has_blob_table:
            blobs = {(r["checkpoint_ns"], r["channel"], r["version"]): int(r["b"] or 0) for r in self.session.query(
                "SELECT checkpoint_ns, channel, version, COALESCE(length(blob), 0) AS b FROM checkpoint_blobs "
                "WHERE thread_id = ?", [thread_id])}
        return rows, writes, blobs

    def stored_bytes(self, thread_id: str) -> int:
        """Bytes of the thread in LangGraph's tables."""
        return self.session.stored_bytes(thread_id)

    def watermark(self, thread_id: str) -> tuple[int, str | None]:
        """``(checkpoint count, newest id)`` as committed now."""
        return self.session.watermark(thread_id)


def _chunks(ids: list[str], size: int = 500) -> Iterable[list[str]]:
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


class MemorySession:
    """What the one-pass walk needs of a session, over an ``InMemorySaver`` (the ``query`` it runs: the root head).

    The saver is a shallow copy sharing the original's dictionaries, so the
    walk's decoder wraps the copy's serializer, not the caller's.
    """

    dialect = "memory"

    def __init__(self, saver: Any):
        self.saver = copy.copy(saver)
        self.original = saver

    def namespaces(self, thread_id: str) -> list[str]:
        """The thread's ``checkpoint_ns`` values, root first."""
        return sorted(self.original.storage.get(thread_id, {}), key=lambda ns: (ns != "", ns))

    def task_paths(self, thread_id: str) -> dict[tuple[str, str, str], str]:
        """``{(ns, checkpoint_id, task_id): task_path}`` of ``messages`` writes."""
        out = {}
        for (tid, ns, cid), stored in self.original.writes.items():
            if tid == thread_id:
                for task_id, channel, _value, path in stored.values():
                    if channel == "messages":
                        out[(ns, cid, task_id)] = path
        return out

    def query(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Answers the one query the walk runs (the root namespace's head); anything else is an error."""
        if "MAX(checkpoint_id) AS head" not in sql:
            raise NotImplementedError(f"MemorySession answers only the walk's head query, not {sql!r}")
        root = self.original.storage.get(params[0], {}).get("", {})
        return [{"head": max(root) if root else None}]


class MemoryStore:
    """Row operations of one thread's prune on an ``InMemorySaver`` (its ``storage``, ``writes``, ``blobs``).

    Use as a context manager: entering takes the saver's lock and copies the
    thread's entries; :meth:`rollback` puts the copy back; leaving without
    :meth:`commit` rolls back.
    """

    persistent = False
    dialect = "memory"
    shared_versions = True  # one ``blobs`` entry per (thread, namespace, channel, version)

    def __init__(self, saver: Any, thread_id: str):
        self.session = MemorySession(saver)
        self.saver = self.session.saver
        self._mem = saver
        self.thread_id = thread_id
        with _LOCKS_GUARD:
            self._lock = _LOCKS.setdefault(saver, threading.Lock())
        self._copy: tuple[Any, ...] | None = None

    def __enter__(self) -> MemoryStore:
        self._lock.acquire()
        t = self.thread_id
        self._copy = ({ns: dict(v) for ns, v in self._mem.storage.get(t, {}).items()},
                      {k: dict(v) for k, v in self._mem.writes.items() if k[0] == t},
                      {k: v for k, v in self._mem.blobs.items() if k[0] == t})
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._copy is not None:
                self.rollback()
        finally:
            self._lock.release()

    def commit(self) -> None:
        """Keep the changes (drop the copy)."""
        self._copy = None

    def rollback(self) -> None:
        """Put the thread's copied entries back."""
        if self._copy is None:
            return
        t = self.thread_id
        storage, writes, blobs = self._copy
        self._mem.storage.pop(t, None)
        for ns, entries in storage.items():
            self._mem.storage[t][ns] = dict(entries)
        for k in [k for k in self._mem.writes if k[0] == t]:
            del self._mem.writes[k]
        self._mem.writes.update({k: dict(v) for k, v in writes.items()})
        for k in [k for k in self._mem.blobs if k[0] == t]:
            del self._mem.blobs[k]
        self._mem.blobs.update(blobs)

    def writes_owners(self, thread_id: str) -> set[_Key]:
        """Checkpoints with pending writes stored under them."""
        return {(ns, cid) for (tid, ns, cid), v in self._mem.writes.items() if tid == thread_id and v}

    def raw_metadata(self, thread_id: str, key: _Key) -> Any:
        """The stored (serialized) metadata of one checkpoint."""
        return self._mem.storage[thread_id][key[0]][key[1]][1]

    def finish_rebase(self, thread_id: str, key: _Key, metadata: Any) -> None:
        """Parent link cleared, original metadata put back."""
        ns_storage = self._mem.storage[thread_id][key[0]]
        checkpoint, _metadata, _parent = ns_storage[key[1]]
        ns_storage[key[1]] = (checkpoint, metadata, None)

    def blob_keys(self, thread_id: str) -> set[tuple[str, str, str]]:
        """``{(checkpoint_ns, channel, version)}`` of the thread's blobs."""
        return {(ns, ch, ver) for (tid, ns, ch, ver) in self._mem.blobs if tid == thread_id}

    def delete(self, thread_id: str, deleted: set[_Key], garbage: set[tuple[str, str, str]],
               clear: Iterable[_Key]) -> None:
        """Delete checkpoints, their writes and garbage blobs; clear parent links of ``clear``."""
        storage = self._mem.storage[thread_id]
        for ns, cid in deleted:
            storage.get(ns, {}).pop(cid, None)
            self._mem.writes.pop((thread_id, ns, cid), None)
        for ns in [ns for ns, v in storage.items() if not v]:
            del storage[ns]
        for ns, channel, version in garbage:
            self._mem.blobs.pop((thread_id, ns, channel, version), None)
        for ns, cid in clear:
            checkpoint, metadata, _parent = storage[ns][cid]
            storage[ns][cid] = (checkpoint, metadata, None)

    def sizes(self, thread_id: str) -> tuple[dict[_Key, int], dict[_Key, int], dict[tuple[str, str, str], int]]:
        """Serialized bytes per checkpoint, per checkpoint's writes, per blob."""
        rows = {(ns, cid): len(c[1]) + len(m[1]) for ns, v in self._mem.storage.get(thread_id, {}).items()
                for cid, (c, m, _p) in v.items()}
        writes = {(ns, cid): sum(len(w[2][1] or b"") for w in v.values())
                  for (tid, ns, cid), v in self._mem.writes.items() if tid == thread_id}
        blobs = {(ns, ch, ver): len(b[1] or b"") for (tid, ns, ch, ver), b in self._mem.blobs.items()
                 if tid == thread_id}
        return rows, writes, blobs

    def stored_bytes(self, thread_id: str) -> int:
        """Serialized bytes of the thread (checkpoints, writes, blobs)."""
        return sum(sum(d.values()) for d in self.sizes(thread_id))

    def watermark(self, thread_id: str) -> tuple[int, str | None]:
        """``(checkpoint count, newest id)``."""
        ids = [cid for v in self._mem.storage.get(thread_id, {}).values() for cid in v]
        return len(ids), max(ids) if ids else None
