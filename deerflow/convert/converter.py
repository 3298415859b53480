"""Materialize-and-convert: rewrite a delta thread so a full-mode process can read it.

The spec's remediation for a 409 ("materialize and convert its checkpoints
before using full mode"), done per thread in one transaction
(:mod:`deerflow.convert.storage`):

1. lock the thread and record its watermark (checkpoint count, newest id);
2. read each namespace through the saver a page at a time
   (:mod:`deerflow.convert.reading`), sharing one object per distinct message
   (:class:`~deerflow.convert.encoding.SharingDecoder`);
3. optionally walk it once without writing and compare every checkpoint with
   LangGraph's own delta reader (the integrity check; a difference or a
   blocking finding stops here and is reported);
4. walk the checkpoint tree once (:mod:`deerflow.convert.onepass`) and, as each
   checkpoint's value is known, re-``put`` it through the saver:
   ``channel_values["messages"]`` = the full list (each distinct message
   serialized once, :class:`~deerflow.convert.encoding.MessageEncoder`), the
   DeerFlow marker and LangGraph's ``messages`` counter removed from metadata;
   every other channel, pending write, parent link and id untouched. Before
   the first rewrite the thread's original rows are copied to the backup
   tables. Only the values of open branch points stay in memory;
5. verify: every byte string the saver sent is what the database now holds
   (SHA-256 per rewritten row), no analyzed checkpoint keeps delta metadata, and a
   full-mode accessor read of each namespace head gives the materialized
   digest; any difference rolls back;
6. compare the watermark; a thread that received new checkpoints meanwhile
   is rolled back and retried;
7. commit.

A blocking finding discovered while writing rolls the transaction back, so
nothing is ever half-converted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from langgraph.checkpoint.base import get_checkpoint_metadata, get_serializable_checkpoint_metadata

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import backups
from deerflow.convert.delta_reader import check_against_langgraph as _check_against_langgraph
from deerflow.convert.encoding import MessageDigester, MessageEncoder, RecordingSerializer
from deerflow.convert.onepass import stored_seed
from deerflow.convert.reading import iter_checkpoints
from deerflow.convert.report import STATUSES, ThreadReport
from deerflow.convert.report import Abort as _Abort
from deerflow.convert.report import record as _record
from deerflow.convert.storage import ConversionSession, open_session
from deerflow.convert.walk import Entry as _Entry
from deerflow.convert.walk import Walk as _Walk
from deerflow.convert.walk import check_watermark as _check_watermark
from deerflow.convert.walk import config_for as _config
from deerflow.convert.walk import run_attempts
from deerflow.convert.walk import share_decoded_messages as _share_decoded_messages
from deerflow.digest import messages_sha256
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    COUNTERS_METADATA_KEY,
    checkpoint_metadata_uses_delta,
)
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

__all__ = ["STATUSES", "ThreadReport", "convert_thread", "dry_run_thread", "revert_thread"]


def _clean_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    out = dict(metadata)
    out.pop(CHECKPOINT_MODE_METADATA_KEY, None)
    counters = out.get(COUNTERS_METADATA_KEY)
    if isinstance(counters, dict):
        counters = {k: v for k, v in counters.items() if k != "messages"}
        if counters:
            out[COUNTERS_METADATA_KEY] = counters
        else:
            out.pop(COUNTERS_METADATA_KEY)
    return out


def _metadata_delta(tup: Any) -> bool:
    return tup.metadata.get(CHECKPOINT_MODE_METADATA_KEY) is not None or (
        isinstance(tup.metadata.get(COUNTERS_METADATA_KEY), dict)
        and "messages" in tup.metadata[COUNTERS_METADATA_KEY]
    )


def _plain(tup: Any) -> bool:
    return isinstance(tup.checkpoint["channel_values"].get("messages"), list)


def _has_version(tup: Any) -> bool:
    return "messages" in (tup.checkpoint.get("channel_versions") or {})


def _needs_rewrite(tup: Any, value: list[Any]) -> bool:
    return _metadata_delta(tup) or (not _plain(tup) and (bool(value) or _has_version(tup)))


def _rewrites_version(tup: Any) -> bool:
    """True when a conversion re-``put``s this checkpoint with a ``messages`` version, whatever its value."""
    return _has_version(tup) and (_metadata_delta(tup) or not _plain(tup))


class _VersionPlan:
    """The ``messages`` version each rewritten checkpoint stores its value under, decided in walk order.

    SQLite stores values inline, so every checkpoint keeps its version.
    Postgres keeps one blob per ``(namespace, version)``: checkpoints normally
    share a version only when they share a value, but below a branch point
    LangGraph's reader applies sibling writes, so two checkpoints can share a
    version yet read differently; the later one (in walk order) then gets its
    own version ``<version>~dfa<n>``, which sorts right after the original and
    before every later version (StateGraph nodes trigger on their own
    ``branch:to:*`` channels, so ``next`` is unchanged).
    """

    def __init__(self, dialect: str):
        self.dialect = dialect
        self._digest: dict[tuple[str, str], str | None] = {}

    def target(self, e: _Entry) -> Any:
        """The version ``e`` is rewritten under (``None`` when it has no ``messages`` version)."""
        versions = e.tup.checkpoint.get("channel_versions") or {}
        if "messages" not in versions:
            return None
        version = versions["messages"]
        if self.dialect != "postgres":
            return version
        candidate, n = str(version), 0
        while self._digest.setdefault((e.ns, candidate), e.digest) != e.digest:
            n += 1
            candidate = f"{version}~dfa{n}"
        return candidate


def _rewritten(thread_id: str, e: _Entry, target_version: Any,
               encoder: MessageEncoder) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(config, checkpoint, metadata, new_versions)`` to ``put`` for one rewritten checkpoint.

    ``channel_values["messages"]`` is the value encoded by ``encoder`` (the
    same bytes once serialized); ``new_versions`` names ``messages`` when the
    checkpoint has a version.

    Raises:
        _Abort: ``blocked`` when the checkpoint has messages but no ``messages`` channel version.
    """
    tup = e.tup
    checkpoint = dict(tup.checkpoint)
    checkpoint["channel_values"] = dict(checkpoint["channel_values"])
    versions = checkpoint.get("channel_versions") or {}
    new_versions: dict[str, Any] = {}
    if "messages" in versions:
        checkpoint["channel_values"]["messages"] = encoder.encode(e.value or [])
        if target_version != versions["messages"]:
            checkpoint["channel_versions"] = {**versions, "messages": target_version}
        new_versions["messages"] = target_version
    elif e.value:
        raise _Abort("blocked", f"checkpoint {checkpoint['id']} has messages but no channel version",
                     "Leave this thread in delta mode and report the thread shape.")
    else:
        checkpoint["channel_values"].pop("messages", None)
    parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
    return _config(thread_id, e.ns, parent), checkpoint, _clean_metadata(tup.metadata), new_versions


class _Estimate:
    """Bytes the thread will occupy after conversion, accumulated as rewritten checkpoints pass.

    ``bytes_before`` minus what is replaced plus what is written. Each
    rewritten ``checkpoints`` row is built and serialized as the saver's ``put``
    stores it (SQLite: the checkpoint blob and metadata JSON; Postgres: the two
    JSONB documents, sized by the server) and replaces the stored row. On
    Postgres each planned ``messages`` blob (one per namespace and version) also
    replaces the blob stored at the original version.
    """

    def __init__(self, session: ConversionSession, thread_id: str, bytes_before: int):
        self.session, self.thread_id = session, thread_id
        self.serde = session.saver.serde
        self.encoder = MessageEncoder(self.serde)
        self.plan = _VersionPlan(session.dialect)
        self.sizes = session.checkpoint_row_sizes(thread_id)
        self.blobs = session.messages_blob_sizes(thread_id)
        self.total = bytes_before
        self._documents: list[Any] = []
        self._old_seen: set[tuple[str, str]] = set()
        self._new_seen: set[tuple[str, str]] = set()

    def add(self, e: _Entry) -> None:
        """Account for one rewritten checkpoint."""
        target = self.plan.target(e)
        config, checkpoint, metadata, _versions = _rewritten(self.thread_id, e, target, self.encoder)
        self.total -= self.sizes.get((e.ns, e.checkpoint_id), 0)
        if self.session.dialect == "sqlite":
            self.total += len(self.serde.dumps_typed(checkpoint)[1]) + len(
                json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode("utf-8", "ignore"))
            return
        from psycopg.types.json import Jsonb

        inline = {k: v for k, v in checkpoint["channel_values"].items()
                  if v is None or isinstance(v, (str, int, float, bool))}
        self._documents += [Jsonb({**checkpoint, "channel_values": inline}),
                            Jsonb(get_serializable_checkpoint_metadata(config, metadata))]
        if len(self._documents) >= 512:
            self._flush()
        if target is None:
            return
        old = (e.ns, str(e.tup.checkpoint["channel_versions"]["messages"]))
        if old not in self._old_seen:
            self._old_seen.add(old)
            self.total -= self.blobs.get(old, 0)
        new = (e.ns, str(target))
        if new not in self._new_seen:
            self._new_seen.add(new)
            self.total += len(self.serde.dumps_typed(checkpoint["channel_values"]["messages"])[1])

    def _flush(self) -> None:
        if self._documents:
            self.total += int(self.session.query(
                "SELECT COALESCE(SUM(pg_column_size(d)), 0) AS b FROM unnest(?::jsonb[]) AS d",
                [self._documents])[0]["b"])
            self._documents = []

    def result(self) -> int:
        """The estimated bytes after conversion."""
        self._flush()
        return self.total


class _DeferredSync:
    """The ``pipe`` handed to the pipelined ``PostgresSaver``: its per-``put`` ``sync()`` does not wait
    (:meth:`_Writer.pipelined` syncs the real pipeline)."""

    def sync(self) -> None:
        """Nothing: the writer decides when to wait."""


class _Writer:
    """Rewrites checkpoints through the saver as the walk hands them on, recording what the saver sent.

    The first rewrite copies the thread's original rows to a new backup (same
    transaction). The saver's serializer is wrapped in a
    :class:`RecordingSerializer` so every rewritten row's bytes can be checked
    against the database afterwards (:meth:`verify`).
    """

    #: Postgres: rewritten checkpoints queued in the pipeline before waiting for the server (count).
    PIPELINE_DEPTH = 32

    def __init__(self, session: ConversionSession, thread_id: str, note: str):
        self.session, self.thread_id, self.note = session, thread_id, note
        self.serde = RecordingSerializer(session.saver.serde)
        session.saver.serde = self.serde
        self.saver = session.saver  # the saver that puts; a pipelined twin inside pipelined()
        self._pipeline: Any = None
        self._stack: ExitStack | None = None
        self._queued = 0
        self.encoder = MessageEncoder(self.serde.inner)
        self.plan = _VersionPlan(session.dialect)
        self.backup_id: str | None = None
        # Postgres: (ns, version) -> (sha256, bytes) of the messages blob; SQLite: (ns, checkpoint_id) -> checkpoint blob.
        self.sent: dict[tuple[str, str], tuple[str, int]] = {}
        self.versions: dict[tuple[str, str], str | None] = {}  # (ns, checkpoint_id) -> messages version written
        self.analyzed: set[tuple[str, str]] = set()
        self.heads: dict[str, tuple[str, str | None]] = {}  # ns -> (newest analyzed checkpoint id, digest)

    @contextmanager
    def pipelined(self) -> Iterator[None]:
        """Postgres: from the first rewrite on (after the backup), queue the rewrites in psycopg's
        pipeline mode, waiting for the server every :data:`PIPELINE_DEPTH` checkpoints instead of
        after each ``put``.

        The puts go through a second ``PostgresSaver`` on the session's
        connection, given the pipeline, so its ``put`` is LangGraph's own; only
        the wait it does after each one is deferred. A failed statement raises
        at the next wait, which rolls the whole conversion back. SQLite: as is.
        """
        with ExitStack() as stack:
            self._stack = stack
            try:
                yield
                if self._pipeline is not None:
                    self._pipeline.sync()
            finally:
                self.saver, self._pipeline, self._stack = self.session.saver, None, None

    def _pipelining(self) -> None:
        if self._pipeline is None and self._stack is not None and self.session.dialect == "postgres":
            from langgraph.checkpoint.postgres import PostgresSaver

            self._pipeline = self._stack.enter_context(self.session.conn.pipeline())
            self.saver = PostgresSaver(self.session.conn, pipe=_DeferredSync(), serde=self.serde)

    def begin_namespace(self, ns: str, tuples: dict[str, Any]) -> None:
        """Postgres: delete the ``messages`` blobs this namespace's rewrites will replace, in one statement.

        The saver's blob upsert keeps an existing row (``ON CONFLICT DO
        NOTHING``), so the original rows at those versions must go first; which
        checkpoints are rewritten with a version does not depend on their
        values (:func:`_rewrites_version`), and split versions (``~dfa<n>``)
        are new. The deletion is part of the conversion's transaction.
        """
        versions = sorted({str(t.checkpoint["channel_versions"]["messages"])
                           for t in tuples.values() if _rewrites_version(t)})
        if self.session.dialect == "postgres" and versions:
            self._back_up()
            self.session.execute("DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                                 "AND channel = 'messages' AND version = ANY(?)", [self.thread_id, ns, versions])

    def _back_up(self) -> None:
        """Copy the thread's original rows to a new backup, once, before anything is changed."""
        if self.backup_id is None:
            self.session.ensure_backup_tables()
            self.backup_id = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
            backups.copy_to_backup(self.session, self.backup_id, self.thread_id, note=self.note)

    def see(self, e: _Entry) -> None:
        """Note an analyzed checkpoint (rewritten or not) for the verification."""
        self.analyzed.add((e.ns, e.checkpoint_id))
        if e.ns not in self.heads or e.checkpoint_id > self.heads[e.ns][0]:
            self.heads[e.ns] = (e.checkpoint_id, e.digest)

    def write(self, e: _Entry) -> None:
        """Back up the thread (first call only), then re-``put`` one checkpoint with its full value."""
        session = self.session
        self._back_up()
        self._pipelining()  # after the backup: its statements need their row counts
        target = self.plan.target(e)
        config, checkpoint, metadata, new_versions = _rewritten(self.thread_id, e, target, self.encoder)
        self.versions[(e.ns, e.checkpoint_id)] = None if target is None else str(target)
        blob_key = (e.ns, str(target))
        if session.dialect == "postgres" and blob_key in self.sent:
            new_versions = {}  # same namespace, version and value: the blob is already written
        self.serde.last = None
        self.saver.put(config, checkpoint, metadata, new_versions)
        if self._pipeline is not None:
            self._queued += 1
            if self._queued % self.PIPELINE_DEPTH == 0:
                self._pipeline.sync()
        if session.dialect == "sqlite":
            self.sent[(e.ns, e.checkpoint_id)] = self.serde.last
        elif new_versions:
            self.sent[blob_key] = self.serde.last

    def verify(self) -> None:
        """Compare the database with what was sent, then read each namespace head in full mode.

        Raises:
            _Abort: ``verification_failed`` naming the first checkpoint (or blob) that differs.
        """
        session, thread_id = self.session, self.thread_id

        def fail(error: str, difference: dict[str, Any]) -> _Abort:
            return _Abort("verification_failed", error, "Nothing was changed (rolled back). Report the thread shape.",
                          difference)

        if session.dialect == "postgres":
            stored = {(r["checkpoint_ns"], r["version"]): (r["h"], int(r["n"])) for r in session.query(
                "SELECT checkpoint_ns, version, encode(sha256(blob), 'hex') AS h, COALESCE(length(blob), 0) AS n FROM checkpoint_blobs "
                "WHERE thread_id = ? AND channel = 'messages'", [thread_id])}
            rows = session.query("SELECT checkpoint_ns, checkpoint_id, checkpoint->'channel_versions'->>'messages' AS v, "
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
                           {"checkpoint_ns": key[0], "key": key[1], "sent_sha256": sent[0],
                            "stored_sha256": (stored.get(key) or (None,))[0]})
        for row in rows:
            key = (row["checkpoint_ns"], row["checkpoint_id"])
            if key not in self.analyzed:
                continue  # written by someone else after the analysis; the watermark check decides
            if checkpoint_metadata_uses_delta(row["metadata"]):
                raise fail(f"checkpoint {key[1]} still carries delta metadata after rewrite",
                           {"checkpoint_id": key[1], "checkpoint_ns": key[0]})
            if session.dialect == "postgres" and key in self.versions and row["v"] != self.versions[key]:
                raise fail(f"checkpoint {key[1]} points at messages version {row['v']!r}, "
                           f"not the rewritten {self.versions[key]!r}",
                           {"checkpoint_id": key[1], "checkpoint_ns": key[0]})
        accessor = CheckpointStateAccessor.for_saver(session.saver, mode="full")
        for ns, (cid, want) in self.heads.items():
            head = accessor.get(_config(thread_id, ns, cid))
            got = messages_sha256(head.values.get("messages") or [])
            if want is not None and got != want:
                raise fail(f"full-mode accessor read of head {cid} differs",
                           {"checkpoint_id": cid, "checkpoint_ns": ns, "expected_sha256": want,
                            "full_mode_sha256": got})


def dry_run_thread(database: DatabaseConfig, thread_id: str, *, integrity: bool = True,
                   acknowledge_branch_ambiguous: bool = False) -> ThreadReport:
    """Analyze one thread without writing: what conversion would rewrite and cost.

    Reads one consistent snapshot and takes no lock, so DeerFlow keeps
    writing meanwhile (SQLite: no write lock; Postgres: a read-only transaction).

    Args:
        database: the checkpoint database.
        thread_id: the thread.
        integrity: also compare every checkpoint with LangGraph's own delta reader.
        acknowledge_branch_ambiguous: accept ``branch_ambiguous`` findings (see :func:`convert_thread`).

    Returns:
        A :class:`ThreadReport` with status ``already_full``, ``needs_conversion``,
        ``blocked``, ``branch_ambiguous``, ``integrity_mismatch`` or ``not_found``; ``bytes_after`` is an estimate.
    """
    started = time.monotonic()
    report = ThreadReport(thread_id=thread_id, acknowledged=_acknowledged(acknowledge_branch_ambiguous))
    with open_session(database, write=False) as session:
        report.attempts = 1
        try:
            if session.watermark(thread_id)[0] == 0:
                raise _Abort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")
            report.bytes_before = session.stored_bytes(thread_id)
            walk = _Walk(session, thread_id, report, _needs_rewrite)
            estimate = _Estimate(session, thread_id, report.bytes_before)
            digests = []
            for e in walk:
                digests.append((e.ns, e.checkpoint_id, e.digest, e.differs))
                if e.rewrite:
                    estimate.add(e)
            walk.raise_if_blocked(frozenset(report.acknowledged))
            if not report.checkpoints_to_rewrite:
                report.status, report.bytes_after = "already_full", report.bytes_before
            else:
                if integrity:
                    _check_against_langgraph(session, thread_id, digests)
                report.bytes_after = estimate.result()
                report.status = "needs_conversion"
        except _Abort as exc:
            _record(report, exc)
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def convert_thread(
    database: DatabaseConfig,
    thread_id: str,
    *,
    integrity: bool = True,
    max_attempts: int = 3,
    note: str = "",
    before_commit: Callable[[ConversionSession], None] | None = None,
    acknowledge_branch_ambiguous: bool = False,
) -> ThreadReport:
    """Convert one thread from delta to full storage, verified, in one transaction.

    Memory holds one object per distinct message of the thread, lists of
    references for the stored snapshots, and the values of open branch points
    (not one full list per checkpoint).

    Args:
        database: the checkpoint database (sqlite or postgres).
        thread_id: the thread.
        integrity: compare with LangGraph's reader before writing (recommended).
        max_attempts: transactions to try when new checkpoints arrive meanwhile (count).
        note: stored with the backup (e.g. the job id).
        before_commit: test hook called with the session just before commit.
        acknowledge_branch_ambiguous: the operator accepts sibling forks whose writes are all
            stored under the branch point (``branch_ambiguous`` findings): those children are
            written as LangGraph's reader reads them (every write of the branch point) and the
            report lists ``acknowledged: ["branch_ambiguous"]``. Without it such a thread
            ends ``branch_ambiguous``, nothing written.

    Returns:
        A :class:`ThreadReport`: ``converted`` (with ``backup_id``), ``already_full``
        (nothing written, rows byte-identical), or a failure status with
        ``error`` and ``hint``; on failure nothing was written.
    """
    acknowledged = _acknowledged(acknowledge_branch_ambiguous)

    def once(session: ConversionSession, report: ThreadReport) -> None:
        report.acknowledged = list(acknowledged)
        _convert_once(session, thread_id, report, integrity=integrity, note=note, before_commit=before_commit)

    return run_attempts(database, thread_id, once, max_attempts=max_attempts)


def _acknowledged(branch_ambiguous: bool) -> list[str]:
    return ["branch_ambiguous"] if branch_ambiguous else []


def _convert_once(session: ConversionSession, thread_id: str, report: ThreadReport, *, integrity: bool,
                  note: str, before_commit: Callable[[ConversionSession], None] | None) -> None:
    session.lock_thread(thread_id)
    mark = session.watermark(thread_id)
    if mark[0] == 0:
        raise _Abort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")
    report.bytes_before = session.stored_bytes(thread_id)
    walk = _Walk(session, thread_id, report, _needs_rewrite)
    if integrity:
        digests = [(e.ns, e.checkpoint_id, e.digest, e.differs) for e in walk]
        walk.raise_if_blocked(frozenset(report.acknowledged))
        if not report.checkpoints_to_rewrite:
            report.status, report.bytes_after = "already_full", report.bytes_before
            return
        _check_against_langgraph(session, thread_id, digests)
    writer = _Writer(session, thread_id, note)
    walk.on_namespace = writer.begin_namespace
    with writer.pipelined():
        for e in walk:
            writer.see(e)
            if e.rewrite:
                writer.write(e)
    walk.raise_if_blocked(frozenset(report.acknowledged))  # met while writing: the rollback undoes every write
    if not report.checkpoints_to_rewrite:
        report.status, report.bytes_after = "already_full", report.bytes_before
        return
    # A writer that committed meanwhile (Postgres READ COMMITTED) would show up in the verification
    # as unconverted rows: that is a retry, not a verification failure.
    _check_watermark(session, thread_id, mark)
    writer.verify()
    if before_commit is not None:
        before_commit(session)
    _check_watermark(session, thread_id, mark)
    report.bytes_after = session.stored_bytes(thread_id)
    report.backup_id = writer.backup_id
    report.status = "converted"
    session.commit()


def revert_thread(database: DatabaseConfig, backup_id: str) -> ThreadReport:
    """Restore a converted thread from its backup, verified, in one transaction.

    The converted rows' full values are read first; after the original rows
    are back, the one-pass materialization of every checkpoint must give the
    same canonical digests (so the revert loses nothing a reader saw).

    Returns:
        A :class:`ThreadReport` with status ``reverted``, or ``not_found`` /
        ``verification_failed`` with ``error`` and ``hint`` (nothing written).
    """
    started = time.monotonic()
    report = ThreadReport(thread_id="", attempts=1, backup_id=backup_id)
    with open_session(database) as session:
        try:
            try:
                info = backups.get_backup(session, backup_id)
            except backups.BackupNotFoundError as exc:
                raise _Abort("not_found", str(exc), "List backups to find the right id.") from exc
            report.thread_id = info.thread_id
            session.lock_thread(info.thread_id)
            converted = _stored_digests(session, info.thread_id)
            report.bytes_before = session.stored_bytes(info.thread_id)
            try:
                backups.restore_rows(session, backup_id)
            except backups.BackupNotFoundError as exc:
                raise _Abort("not_found", str(exc), "Only an active backup can be restored.") from exc
            walk = _Walk(session, info.thread_id, report, _needs_rewrite)
            for e in walk:
                key = (e.ns, e.checkpoint_id)
                if key in converted and converted[key] != e.digest:
                    raise _Abort("verification_failed", f"restored checkpoint {key[1]} reads differently",
                                 "Nothing was changed (rolled back).",
                                 {"checkpoint_id": key[1], "checkpoint_ns": key[0],
                                  "converted_sha256": converted[key], "restored_sha256": e.digest})
            walk.raise_if_blocked(frozenset({"branch_ambiguous"}))  # restoring the original rows is always allowed
            report.bytes_after = session.stored_bytes(info.thread_id)
            report.status = "reverted"
            session.commit()
        except _Abort as exc:
            _record(report, exc)
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def _stored_digests(session: ConversionSession, thread_id: str) -> dict[tuple[str, str], str]:
    """``{(checkpoint_ns, checkpoint_id): digest}`` of every checkpoint that stores its full value.

    Reads a page at a time and decodes each distinct message once, so a
    converted (full-mode) thread never sits in memory whole.
    """
    out = {}
    _share_decoded_messages(session)
    digest = MessageDigester()
    for ns in session.namespaces(thread_id):
        for tup in iter_checkpoints(session.saver, thread_id, ns):
            stored = tup.checkpoint["channel_values"].get("messages")
            is_seed, value, _ = stored_seed(stored)
            if is_seed and isinstance(value, list):
                out[(ns, tup.config["configurable"]["checkpoint_id"])] = digest(value)
    return out
