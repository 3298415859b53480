"""Full->delta compaction: rewrite a legacy full-mode thread as a delta-mode process would have stored it.

The mirror image of :mod:`deerflow.convert.converter`, per thread in one
transaction (:mod:`deerflow.storage.sessions`):

1. lock the thread and record its watermark (checkpoint count, newest id);
2. read each namespace through the saver a page at a time and materialize
   every checkpoint once (:class:`~deerflow.convert.walk.Walk`); on Postgres
   the walk reads on a second connection that imports the transaction's
   snapshot (:func:`~deerflow.storage.sessions.open_snapshot_reader`: the
   rows as they were when the thread was locked), so the backup below is
   copied on the write connection, in a thread of its own, while the walk
   reads and decodes;
3. decide where ``_DeltaSnapshot`` s go (:mod:`deerflow.convert.compact_plan`:
   LangGraph's cadence rule, its supersteps bound, and wherever the writes do
   not reproduce the stored value) and re-``put`` each full checkpoint through
   the saver without its ``messages`` list (or with the snapshot), with the
   DeerFlow marker and LangGraph's ``counters_since_delta_snapshot`` in the
   metadata; pending writes, parent links, ids, other channels untouched.
   Before the first rewrite the thread's rows are copied to a backup
   (:func:`deerflow.convert.backups.copy_to_backup`), so
   :func:`~deerflow.convert.converter.revert_thread` restores them byte for byte;
4. verify: the rewritten rows, read back in the transaction, give every
   checkpoint the digest LangGraph's delta reader read before (where an
   already-delta part reads differently under the replay rule, LangGraph's
   reading: :mod:`deerflow.convert.reader_values`), as that reader reads them
   (its read rule replayed along the tree, and real ``get_state`` reads at
   every namespace head, every snapshot seam and a few more:
   :func:`deerflow.convert.integrity.verify_against_langgraph`); any
   difference rolls back (``verification_failed``, both digests);
5. compare the watermark (a thread that received checkpoints meanwhile is
   rolled back and retried), then commit.

Postgres keeps one blob per ``(namespace, channel, version)``: the thread's
full ``messages`` blobs at the rewritten versions are deleted first and the
saver writes a ``_DeltaSnapshot`` blob (and its inline ``true`` marker) only at
snapshot checkpoints, as LangGraph's ``PostgresSaver.put`` does in delta mode.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import get_checkpoint_metadata, get_serializable_checkpoint_metadata

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.compact_plan import Decision, SnapshotPlanner, compacted_row, is_full_checkpoint
from deerflow.convert.compact_writer import CompactionWriter, has_messages
from deerflow.convert.integrity import IntegrityCheck, verify_against_langgraph
from deerflow.convert.reader_values import ReaderValues
from deerflow.convert.report import Abort, ThreadReport, record
from deerflow.convert.walk import Entry, Walk, check_watermark, run_attempts, share_decoded_messages
from deerflow.storage.addressing import config_for
from deerflow.storage.sessions import ConversionSession, open_session, open_snapshot_reader

if TYPE_CHECKING:
    from langgraph.checkpoint.base import CheckpointTuple

__all__ = ["compact_thread", "dry_run_compact"]


def _needs_rewrite(tup: CheckpointTuple, value: list[Any]) -> bool:
    return is_full_checkpoint(tup)


class _Pass:
    """One walk of the thread with its snapshot plan; calls ``on_rewrite(entry, decision)`` per full checkpoint.

    Fills ``report.snapshot_positions`` and ``report.checkpoints_to_rewrite``
    (0 when no full checkpoint holds messages: nothing to compact), and keeps
    ``digests``: ``[(checkpoint_ns, checkpoint_id, digest before)]`` of every checkpoint.
    """

    def __init__(self, session: ConversionSession, thread_id: str, report: ThreadReport, k: int):
        self.report = report
        self.walk = Walk(session, thread_id, report, _needs_rewrite, full_storage=True)
        self.planner = SnapshotPlanner(k, self.walk.digest)
        # where a delta part of the thread reads differently under LangGraph's reader, its reading is the truth
        self.values = ReaderValues(session.saver, thread_id, lambda: self.walk.writes, self.walk.digest)
        self.walk.on_namespace = self._begin
        self.digests: list[tuple[str, str, str | None]] = []
        self.with_messages = 0
        self.on_namespace: Callable[[str, dict[str, Any]], None] | None = None
        self.integrity: IntegrityCheck | None = None

    def _begin(self, ns: str, tuples: dict[str, Any]) -> None:
        self.values.begin_namespace(ns, tuples)
        self.planner.begin_namespace(tuples)
        if self.integrity is not None:
            self.integrity.begin_namespace(ns, tuples)
        if self.on_namespace is not None:
            self.on_namespace(ns, tuples)

    def check_integrity(self, session: ConversionSession, thread_id: str) -> None:
        """Compare every checkpoint's one-pass value with LangGraph's reader on the rows this walk reads
        (:class:`~deerflow.convert.integrity.IntegrityCheck`; raised by :meth:`raise_if_different`)."""
        self.integrity = IntegrityCheck(session, thread_id, self.walk)

    def raise_if_different(self) -> None:
        """Raises ``Abort("integrity_mismatch")`` when the integrity check found a difference."""
        if self.integrity is not None:
            self.integrity.raise_if_different()

    def run(self, on_rewrite: Callable[[Entry, Decision], None]) -> None:
        """Walk once; raises ``Abort("blocked")`` after the walk when a value could not be materialized."""
        self.report.snapshot_positions = []
        for e in self.walk:
            self.values.apply(e, self.report)
            if self.integrity is not None:
                self.integrity.compare(e)
            self.digests.append((e.ns, e.checkpoint_id, e.digest))
            if e.value is None:
                continue
            decision = self.planner.decide(e, self.walk.writes.get(e.checkpoint_id, []))
            if decision is None:
                continue
            self.with_messages += has_messages(e.tup)
            if decision.snapshot:
                self.report.snapshot_positions.append({
                    "checkpoint_ns": e.ns, "checkpoint_id": e.checkpoint_id,
                    "step": e.tup.metadata.get("step"), "reason": decision.reason})
            on_rewrite(e, decision)
        self.walk.raise_if_blocked()
        if not self.with_messages:
            self.report.checkpoints_to_rewrite = 0


class _Estimate:
    """Bytes after compaction, without writing: ``bytes_before`` minus replaced rows plus their new forms.

    SQLite: each rewritten ``checkpoints`` row as the saver serializes it.
    Postgres: the two JSONB documents sized by the server, every full
    ``messages`` blob at a rewritten version removed, one ``_DeltaSnapshot``
    blob per snapshot version added.
    """

    def __init__(self, session: ConversionSession, thread_id: str, bytes_before: int):
        self.session, self.thread_id, self.total = session, thread_id, bytes_before
        self.serde = session.saver.serde
        self.sizes = session.checkpoint_row_sizes(thread_id)
        self.blobs = session.messages_blob_sizes(thread_id)
        self._docs: list[Any] = []
        self._old: set[tuple[str, str]] = set()
        self._new: set[tuple[str, str]] = set()

    def add(self, e: Entry, decision: Decision) -> None:
        """Account for one rewritten checkpoint."""
        checkpoint, metadata = compacted_row(e.tup, e.value, decision)
        config = config_for(self.thread_id, e.ns, None)
        self.total -= self.sizes.get((e.ns, e.checkpoint_id), 0)
        if not self.session.dialect.json_columns:  # msgpack checkpoint + JSON metadata bytes, values inline
            self.total += len(self.serde.dumps_typed(checkpoint)[1]) + len(
                json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode("utf-8", "ignore"))
            return
        from psycopg.types.json import Jsonb

        inline = {k: (True if k == "messages" else v) for k, v in checkpoint["channel_values"].items()
                  if k == "messages" or v is None or isinstance(v, (str, int, float, bool))}
        self._docs += [Jsonb({**checkpoint, "channel_values": inline}),
                       Jsonb(get_serializable_checkpoint_metadata(config, metadata))]
        if len(self._docs) >= 512:
            self._flush()
        version = (checkpoint.get("channel_versions") or {}).get("messages")
        if version is None:
            return
        key = (e.ns, str(version))
        if key not in self._old:
            self._old.add(key)
            self.total -= self.blobs.get(key, 0)
        if decision.snapshot and key not in self._new:
            self._new.add(key)
            self.total += len(self.serde.dumps_typed(checkpoint["channel_values"]["messages"])[1])

    def _flush(self) -> None:
        if self._docs:
            self.total += int(self.session.query(
                "SELECT COALESCE(SUM(pg_column_size(d)), 0) AS b FROM unnest(?::jsonb[]) AS d", [self._docs])[0]["b"])
            self._docs = []

    def result(self) -> int:
        """The estimated bytes after compaction."""
        self._flush()
        return self.total


def _not_found(thread_id: str) -> Abort:
    return Abort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")


def dry_run_compact(database: DatabaseConfig, thread_id: str, *, snapshot_frequency: int,
                    integrity: bool = True) -> ThreadReport:
    """Analyze one thread without writing: where compaction would put snapshots and what it would free.

    Reads one consistent snapshot and takes no lock (SQLite: no write lock;
    Postgres: a read-only transaction), so DeerFlow keeps writing meanwhile.

    Args:
        database: the checkpoint database (sqlite or postgres).
        thread_id: the thread.
        snapshot_frequency: the delta-mode process's cadence K (updates, >= 1).
        integrity: also compare every checkpoint's one-pass value with LangGraph's own delta reader.

    Returns:
        A :class:`ThreadReport` with status ``needs_compaction`` (``bytes_after`` an
        estimate, ``bytes_freed``, ``snapshot_positions``), ``already_delta``,
        ``blocked``, ``integrity_mismatch`` or ``not_found``.

    Raises:
        ValueError: ``snapshot_frequency`` below 1, or the memory backend.
    """
    started = time.monotonic()
    report = ThreadReport(thread_id=thread_id, status="needs_compaction")
    with open_session(database, write=False) as session:
        report.attempts = 1
        try:
            if session.watermark(thread_id)[0] == 0:
                raise _not_found(thread_id)
            report.bytes_before = session.stored_bytes(thread_id)
            estimate = _Estimate(session, thread_id, report.bytes_before)
            walk = _Pass(session, thread_id, report, snapshot_frequency)
            if integrity:
                walk.check_integrity(session, thread_id)
            walk.run(estimate.add)
            if not report.checkpoints_to_rewrite:
                report.status, report.bytes_after = "already_delta", report.bytes_before
                report.snapshot_positions = []
            else:
                walk.raise_if_different()
                report.bytes_after = estimate.result()
            report.bytes_freed = report.bytes_before - report.bytes_after
        except Abort as exc:
            record(report, exc)
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def compact_thread(database: DatabaseConfig, thread_id: str, *, snapshot_frequency: int, integrity: bool = True,
                   max_attempts: int = 3, note: str = "",
                   before_commit: Callable[[ConversionSession], None] | None = None) -> ThreadReport:
    """Compact one thread from full to delta storage at cadence ``snapshot_frequency``, verified, in one transaction.

    Memory holds one object per distinct message of the thread and the values
    of open branch points, never one list per checkpoint.

    Args:
        database: the checkpoint database (sqlite or postgres).
        thread_id: the thread.
        snapshot_frequency: the delta-mode fleet's frozen cadence K (updates, >= 1).
        integrity: compare the one-pass values with LangGraph's reader before writing (matters for
            migrated threads, whose delta part is replayed).
        max_attempts: transactions to try when new checkpoints arrive meanwhile (count).
        note: stored with the backup (e.g. the job id).
        before_commit: test hook called with the session just before the last watermark check and commit.

    Returns:
        A :class:`ThreadReport`: ``compacted`` (``backup_id``, measured ``bytes_after``,
        ``bytes_freed``, ``snapshot_positions``), ``already_delta`` (nothing written), or a
        failure status with ``error`` and ``hint`` (nothing written).

    Raises:
        ValueError: ``snapshot_frequency`` below 1, or the memory backend.
    """
    if snapshot_frequency < 1:
        raise ValueError(f"snapshot_frequency must be at least 1, got {snapshot_frequency}")
    return run_attempts(database, thread_id, lambda session, report: _compact_once(
        database, session, thread_id, report, snapshot_frequency, integrity=integrity, note=note,
        before_commit=before_commit), max_attempts=max_attempts)


def _has_full_rows(session: ConversionSession, thread_id: str) -> bool:
    """True when some checkpoint of the thread names a ``messages`` version and shows no delta evidence in its
    metadata: a compaction will most likely rewrite it. Decides only when the backup is taken (while the walk
    reads, or at the first rewrite), never what is written."""
    rows = session.query("SELECT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = ? "
                         "AND (c.checkpoint -> 'channel_versions' -> 'messages') IS NOT NULL "
                         f"AND NOT {session.dialect.delta_evidence('c')}) AS full_rows", [thread_id])
    return bool(rows[0]["full_rows"])


def _compact_once(database: DatabaseConfig, session: ConversionSession, thread_id: str, report: ThreadReport,
                  k: int, *, integrity: bool, note: str,
                  before_commit: Callable[[ConversionSession], None] | None) -> None:
    session.lock_thread(thread_id)
    mark = session.watermark(thread_id)
    if mark[0] == 0:
        raise _not_found(thread_id)
    report.bytes_before = session.stored_bytes(thread_id)
    share_decoded_messages(session)  # the walk and the verification decode into the same message objects
    writer = CompactionWriter(session, thread_id, note)
    # Postgres: the walk reads the rows as they are now through a second connection, so the server copies
    # them into the backup (on this session, in its transaction) while the walk reads and decodes them.
    with open_snapshot_reader(database, session) as reader:
        reader.saver.serde = session.saver.serde
        walk = _Pass(reader, thread_id, report, k)
        if integrity:  # on each namespace's stored rows, read before they are rewritten; raised after the walk
            walk.check_integrity(reader, thread_id)
        walk.on_namespace = writer.begin_namespace
        if reader is not session and _has_full_rows(session, thread_id):
            writer.back_up_meanwhile(session.namespaces(thread_id)[0])
        try:
            with writer.pipelined():
                walk.run(writer.write)
        finally:
            writer.settle()
    if not report.checkpoints_to_rewrite:  # no full checkpoint holds messages: rolled back on exit
        report.status, report.bytes_after, report.snapshot_positions = "already_delta", report.bytes_before, []
        return
    walk.raise_if_different()
    check_watermark(session, thread_id, mark)
    seams = [(p["checkpoint_ns"], p["checkpoint_id"]) for p in report.snapshot_positions or []
             if p["reason"] == "seam"]
    verify_against_langgraph(session, thread_id, walk.digests, walk.walk.digest, seams)
    if before_commit is not None:
        before_commit(session)
    check_watermark(session, thread_id, mark)
    report.bytes_after = session.stored_bytes(thread_id)
    report.bytes_freed = report.bytes_before - report.bytes_after
    report.backup_id = writer.backup_id
    report.status = "compacted"
    session.commit()
