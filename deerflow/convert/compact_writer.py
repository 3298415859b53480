"""The writing half of a full->delta compaction (:mod:`deerflow.convert.compactor`): the backup, taken while
the walk reads on Postgres, the old ``messages`` blobs' removal, and the pipelined re-``put`` of each checkpoint
in its delta form."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from deerflow.convert import backups
from deerflow.convert.compact_plan import Decision, compacted_row, is_full_checkpoint
from deerflow.convert.encoding import MessageEncoder
from deerflow.convert.pipelined import PipelinedPuts
from deerflow.convert.walk import Entry
from deerflow.storage.addressing import config_for
from deerflow.storage.sessions import ConversionSession

if TYPE_CHECKING:
    from langgraph.checkpoint.base import CheckpointTuple

__all__ = ["CompactionWriter", "has_messages"]


def has_messages(tup: CheckpointTuple) -> bool:
    """Whether the checkpoint has a ``messages`` version (the channel was ever written)."""
    return "messages" in (tup.checkpoint.get("channel_versions") or {})


class CompactionWriter:
    """Re-``put`` s full checkpoints in their delta form through the session's saver, after one backup.

    On Postgres the puts are pipelined inside :meth:`pipelined` (:class:`~deerflow.convert.pipelined.PipelinedPuts`,
    as the delta->full writer does); snapshot lists are serialized from each distinct message's cached
    encoding (:class:`~deerflow.convert.encoding.MessageEncoder`: the same bytes, each message encoded once).
    """

    #: Postgres: puts queued before waiting for the server (:class:`PipelinedPuts` ``depth``). At each wait the
    #: client stands still until the server has compressed and stored every queued snapshot.
    PUT_DEPTH = 512

    def __init__(self, session: ConversionSession, thread_id: str, note: str):
        self.session, self.thread_id, self.note = session, thread_id, note
        self.puts = PipelinedPuts(session, depth=self.PUT_DEPTH)
        self.encoder = MessageEncoder(session.saver.serde)
        self.backup_id: str | None = None
        self.snapshot_blobs: set[tuple[str, str]] = set()  # Postgres: (ns, version) written as a snapshot
        self._meanwhile: threading.Thread | None = None
        self._meanwhile_error: BaseException | None = None
        self._moved: tuple[str, list[str]] | None = None  # (ns, versions) the backup taken meanwhile moved

    def _back_up(self, move_messages: tuple[str, list[str]] | None = None) -> bool:
        """Back up the thread once; True when this call did, moving ``move_messages`` (Postgres blobs)."""
        if self.backup_id is not None:
            return False
        self.session.ensure_backup_tables()
        self.backup_id = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        backups.copy_to_backup(self.session, self.backup_id, self.thread_id, note=self.note,
                               move_messages=move_messages)
        return True

    #: The savepoint :meth:`back_up_meanwhile` sets before its backup, rolled back to when its guess missed.
    SAVEPOINT = "dfa_compact_backup"

    def _guess_versions(self, ns: str) -> list[str]:
        """Postgres: the ``messages`` versions of namespace ``ns`` that :meth:`begin_namespace` will most likely
        name: those of checkpoints with no delta evidence in their metadata whose version has a stored blob.
        Only a guess (it reads no blob): :meth:`begin_namespace` compares it with the walk's exact set."""
        rows = self.session.query(
            "SELECT DISTINCT c.checkpoint -> 'channel_versions' ->> 'messages' AS version FROM checkpoints c "
            "WHERE c.thread_id = ? AND c.checkpoint_ns = ? "
            "AND (c.checkpoint -> 'channel_versions' -> 'messages') IS NOT NULL "
            f"AND NOT {self.session.dialect.delta_evidence('c')} AND EXISTS (SELECT 1 FROM checkpoint_blobs b "
            "WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = 'messages' "
            "AND b.version = c.checkpoint -> 'channel_versions' ->> 'messages' AND b.type <> 'empty')",
            [self.thread_id, ns])
        return sorted(str(r["version"]) for r in rows)

    def back_up_meanwhile(self, ns: str) -> None:
        """Postgres: take the backup on a thread of its own while the caller's walk reads the thread.

        The backup's statements run on the session's connection, which nothing
        else uses until :meth:`_join` (called by :meth:`begin_namespace` and
        :meth:`write` before they touch the session); the walk reads through a
        second connection (:func:`~deerflow.storage.sessions.open_snapshot_reader`),
        so the server copies the rows while the walk reads and decodes them.
        The backup moves the ``messages`` blobs of namespace ``ns`` (the first
        the walk visits) that :meth:`_guess_versions` names, after a savepoint
        (:attr:`SAVEPOINT`): :meth:`begin_namespace` keeps it when the walk's
        exact set is the guess, else rolls back to the savepoint and takes the
        backup again with the exact set. Same transaction, same backup rows.
        """
        def run() -> None:
            try:
                versions = self._guess_versions(ns)
                self.session.execute(f"SAVEPOINT {self.SAVEPOINT}")
                self._back_up(move_messages=(ns, versions) if versions else None)
                self._moved = (ns, versions)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread by _join
                self._meanwhile_error = exc

        self._meanwhile = threading.Thread(target=run, name="dfa-compact-backup", daemon=True)
        self._meanwhile.start()

    def _join(self) -> None:
        """Wait for :meth:`back_up_meanwhile`'s backup; raises what it raised."""
        if self._meanwhile is not None:
            self._meanwhile.join()
            self._meanwhile = None
            if self._meanwhile_error is not None:
                raise self._meanwhile_error

    def settle(self) -> None:
        """Wait for a backup still running on its thread, without raising (the caller is already failing or
        done; its session rolls back or commits only after this)."""
        if self._meanwhile is not None:
            self._meanwhile.join()

    def begin_namespace(self, ns: str, tuples: dict[str, Any]) -> None:
        """Postgres: delete the full ``messages`` blobs at the versions this namespace's rewrites use.

        The saver's blob upsert keeps an existing row, and a delta-mode reader
        takes any blob at a checkpoint's version as its seed, so a non-snapshot
        version must have none. Which checkpoints are rewritten does not depend
        on their values (:func:`is_full_checkpoint`). Part of the transaction. The first namespace's
        blobs leave in the backup's own statement (:func:`~deerflow.convert.backups.copy_to_backup`'s
        ``move_messages``: copied and deleted in one pass), taken here or, when :meth:`back_up_meanwhile`
        guessed this namespace's exact versions, already.
        """
        self._join()
        versions = sorted({str(t.checkpoint["channel_versions"]["messages"]) for t in tuples.values()
                           if is_full_checkpoint(t) and has_messages(t)})
        if self._moved is not None:
            moved, self._moved = self._moved, None
            if moved == (ns, versions):  # the backup moved exactly these blobs
                self.session.execute(f"RELEASE SAVEPOINT {self.SAVEPOINT}")
                return
            self.session.execute(f"ROLLBACK TO SAVEPOINT {self.SAVEPOINT}")  # the guess missed: no backup yet
            self.session.execute(f"RELEASE SAVEPOINT {self.SAVEPOINT}")
            self.backup_id = None
        if self.session.dialect.has_blob_table and versions and not self._back_up(move_messages=(ns, versions)):
            self.session.execute("DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                                 "AND channel = 'messages' AND version = ANY(?)", [self.thread_id, ns, versions])

    def pipelined(self) -> AbstractContextManager[None]:
        """Postgres: queue the puts of the block in psycopg's pipeline mode (:meth:`PipelinedPuts.pipelined`)."""
        return self.puts.pipelined()

    def write(self, e: Entry, decision: Decision) -> None:
        """Back up the thread (first call only), then re-``put`` one checkpoint in its delta form."""
        self._join()
        self._back_up()
        value = self.encoder.encode(e.value or []) if decision.snapshot else None
        checkpoint, metadata = compacted_row(e.tup, value, decision)
        parent = e.tup.parent_config["configurable"]["checkpoint_id"] if e.tup.parent_config else None
        new_versions: dict[str, Any] = {}
        version = (checkpoint.get("channel_versions") or {}).get("messages")
        if decision.snapshot and version is not None:
            key = (e.ns, str(version))
            if key not in self.snapshot_blobs:  # checkpoints sharing a version share its blob (and value)
                self.snapshot_blobs.add(key)
                new_versions["messages"] = version
        # after the backup (its statements need their row counts), pipelined inside pipelined()
        self.puts.put(config_for(self.thread_id, e.ns, parent), checkpoint, metadata, new_versions)
