"""Delta->full conversion's writer: re-``put`` each checkpoint with its full value, then verify the bytes.

The first rewrite copies the thread's original rows to a backup (same
transaction); on Postgres the rewrites are pipelined
(:mod:`deerflow.convert.pipelined`). :meth:`Writer.verify`
compares every byte string the saver sent with what the database holds,
checks that no analyzed checkpoint keeps delta metadata, and reads each
namespace head through a full-mode accessor.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from contextlib import AbstractContextManager
from typing import Any

from deerflow.convert import backups
from deerflow.convert.digest import messages_sha256
from deerflow.convert.encoding import MessageEncoder, RecordingSerializer
from deerflow.convert.full_rows import VersionPlan, rewrites_version, rewritten
from deerflow.convert.pipelined import PipelinedPuts
from deerflow.convert.report import Abort
from deerflow.convert.walk import Entry
from deerflow.runtime.checkpoint_mode import checkpoint_metadata_uses_delta
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.addressing import config_for
from deerflow.storage.sessions import ConversionSession

__all__ = ["Writer"]


class Writer:
    """Rewrites checkpoints through the saver as the walk hands them on, recording what the saver sent.

    The first rewrite copies the thread's original rows to a new backup (same
    transaction). The saver's serializer is wrapped in a
    :class:`RecordingSerializer` so every rewritten row's bytes can be checked
    against the database afterwards (:meth:`verify`).
    """

    def __init__(self, session: ConversionSession, thread_id: str, note: str):
        self.session, self.thread_id, self.note = session, thread_id, note
        self.serde = RecordingSerializer(session.saver.serde)
        session.saver.serde = self.serde
        self.puts = PipelinedPuts(session, self.serde)
        self.encoder = MessageEncoder(self.serde.inner)
        self.plan = VersionPlan(session.dialect)
        self.backup_id: str | None = None
        # Postgres: (ns, version) -> (sha256, bytes) of the messages blob;
        # SQLite: (ns, checkpoint_id) -> checkpoint blob (None: the saver serialized nothing).
        self.sent: dict[tuple[str, str], tuple[str, int] | None] = {}
        self.versions: dict[tuple[str, str], str | None] = {}  # (ns, checkpoint_id) -> messages version written
        self.analyzed: set[tuple[str, str]] = set()
        self.heads: dict[str, tuple[str, str | None]] = {}  # ns -> (newest analyzed checkpoint id, digest)

    def pipelined(self) -> AbstractContextManager[None]:
        """Postgres: queue the rewrites in psycopg's pipeline mode from the first one on (after the
        backup), as :meth:`deerflow.convert.pipelined.PipelinedPuts.pipelined` does; SQLite: as is."""
        return self.puts.pipelined()

    def begin_namespace(self, ns: str, tuples: dict[str, Any]) -> None:
        """Postgres: delete the ``messages`` blobs this namespace's rewrites will replace, in one statement.

        The saver's blob upsert keeps an existing row (``ON CONFLICT DO
        NOTHING``), so the original rows at those versions must go first; which
        checkpoints are rewritten with a version does not depend on their
        values (:func:`~deerflow.convert.full_rows.rewrites_version`), and split versions (``~dfa<n>``)
        are new. The deletion is part of the conversion's transaction.
        """
        versions = sorted({str(t.checkpoint["channel_versions"]["messages"])
                           for t in tuples.values() if rewrites_version(t)})
        if self.session.dialect.has_blob_table and versions:
            self._back_up()
            self.session.execute("DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                                 "AND channel = 'messages' AND version = ANY(?)", [self.thread_id, ns, versions])

    def _back_up(self) -> None:
        """Copy the thread's original rows to a new backup, once, before anything is changed."""
        if self.backup_id is None:
            self.session.ensure_backup_tables()
            self.backup_id = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
            backups.copy_to_backup(self.session, self.backup_id, self.thread_id, note=self.note)

    def see(self, e: Entry) -> None:
        """Note an analyzed checkpoint (rewritten or not) for the verification."""
        self.analyzed.add((e.ns, e.checkpoint_id))
        if e.ns not in self.heads or e.checkpoint_id > self.heads[e.ns][0]:
            self.heads[e.ns] = (e.checkpoint_id, e.digest)

    def write(self, e: Entry) -> None:
        """Back up the thread (first call only), then re-``put`` one checkpoint with its full value."""
        session = self.session
        self._back_up()
        target = self.plan.target(e)
        config, checkpoint, metadata, new_versions = rewritten(self.thread_id, e, target, self.encoder)
        self.versions[(e.ns, e.checkpoint_id)] = None if target is None else str(target)
        blob_key = (e.ns, str(target))
        if session.dialect.has_blob_table and blob_key in self.sent:
            new_versions = {}  # same namespace, version and value: the blob is already written
        self.serde.last = None
        self.puts.put(config, checkpoint, metadata, new_versions)  # pipelined after the backup (its row counts)
        if not session.dialect.has_blob_table:  # the value is inside the checkpoint row
            self.sent[(e.ns, e.checkpoint_id)] = self.serde.last
        elif new_versions:
            self.sent[blob_key] = self.serde.last

    def verify(self) -> None:
        """Compare the database with what was sent, then read each namespace head in full mode.

        Raises:
            Abort: ``verification_failed`` naming the first checkpoint (or blob) that differs.
        """
        session, thread_id = self.session, self.thread_id

        def fail(error: str, difference: dict[str, Any]) -> Abort:
            return Abort("verification_failed", error, "Nothing was changed (rolled back). Report the thread shape.",
                          difference)

        if session.dialect.has_blob_table:
            stored = {(r["checkpoint_ns"], r["version"]): (r["h"], int(r["n"])) for r in session.query(
                "SELECT checkpoint_ns, version, encode(sha256(blob), 'hex') AS h, COALESCE(length(blob), 0) AS n "
                "FROM checkpoint_blobs WHERE thread_id = ? AND channel = 'messages'", [thread_id])}
            rows = session.query("SELECT checkpoint_ns, checkpoint_id, "
                                 "checkpoint->'channel_versions'->>'messages' AS v, "
                                 "metadata FROM checkpoints WHERE thread_id = ?", [thread_id])
        else:
            stored, rows = {}, []
            for ns, cid, blob, metadata in session.conn.execute(
                    "SELECT checkpoint_ns, checkpoint_id, checkpoint, metadata FROM checkpoints WHERE thread_id = ?",
                    [thread_id]):
                if (ns, cid) in self.sent:
                    stored[(ns, cid)] = (hashlib.sha256(blob or b"").hexdigest(), len(blob or b""))
                rows.append({"checkpoint_ns": ns, "checkpoint_id": cid, "metadata": json.loads(metadata or b"{}")})
        for key, sent in self.sent.items():
            if stored.get(key) != sent:
                raise fail(f"stored bytes of {key[1]} differ from what the saver wrote",
                           {"checkpoint_ns": key[0], "key": key[1], "sent_sha256": (sent or (None,))[0],
                            "stored_sha256": (stored.get(key) or (None,))[0]})
        for row in rows:
            key = (row["checkpoint_ns"], row["checkpoint_id"])
            if key not in self.analyzed:
                continue  # written by someone else after the analysis; the watermark check decides
            if checkpoint_metadata_uses_delta(row["metadata"]):
                raise fail(f"checkpoint {key[1]} still carries delta metadata after rewrite",
                           {"checkpoint_id": key[1], "checkpoint_ns": key[0]})
            if session.dialect.has_blob_table and key in self.versions and row["v"] != self.versions[key]:
                raise fail(f"checkpoint {key[1]} points at messages version {row['v']!r}, "
                           f"not the rewritten {self.versions[key]!r}",
                           {"checkpoint_id": key[1], "checkpoint_ns": key[0]})
        accessor = CheckpointStateAccessor.for_saver(session.saver, mode="full")
        for ns, (cid, want) in self.heads.items():
            head = accessor.get(config_for(thread_id, ns, cid))
            got = messages_sha256(head.values.get("messages") or [])
            if want is not None and got != want:
                raise fail(f"full-mode accessor read of head {cid} differs",
                           {"checkpoint_id": cid, "checkpoint_ns": ns, "expected_sha256": want,
                            "full_mode_sha256": got})
