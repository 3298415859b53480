"""Materialize-and-convert: rewrite a delta thread so a full-mode process can read it.

The spec's remediation for a 409 ("materialize and convert its checkpoints
before using full mode"), done per thread in one transaction
(:mod:`deerflow.convert.storage`):

1. lock the thread and record its watermark (checkpoint count, newest id);
2. read every namespace with the session's saver and materialize ``messages``
   in one pass (:mod:`deerflow.convert.onepass`); blocking findings stop here;
3. optionally compare every checkpoint with LangGraph's own delta reader
   (the integrity check; a difference stops here and is reported);
4. copy the thread's original rows to the backup tables;
5. re-``put`` each checkpoint that needs it through the saver's own
   serializer: ``channel_values["messages"]`` = the full list, the DeerFlow
   marker and LangGraph's ``messages`` counter removed from metadata; every
   other channel, pending write, parent link and id untouched;
6. read every checkpoint back through the full-mode path (the stored value a
   full-mode reader uses, plus a full-mode accessor read of each namespace
   head) and compare canonical digests; any difference rolls back;
7. compare the watermark; a thread that received new checkpoints meanwhile
   is rolled back and retried;
8. commit.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph.checkpoint.base import get_checkpoint_metadata, get_serializable_checkpoint_metadata
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import backups
from deerflow.convert.onepass import CheckpointNode, Finding, Materialized, materialize_namespace, stored_seed
from deerflow.convert.storage import ConversionSession, open_session
from deerflow.digest import canonical_messages, messages_sha256
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    COUNTERS_METADATA_KEY,
    checkpoint_metadata_uses_delta,
)
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

__all__ = ["STATUSES", "ThreadReport", "convert_thread", "dry_run_thread", "revert_thread"]

STATUSES = ("already_full", "needs_conversion", "blocked", "integrity_mismatch", "converted", "reverted",
            "verification_failed", "changed_during_conversion", "not_found")


@dataclass
class ThreadReport:
    """The outcome of a dry run or a conversion of one thread.

    Attributes:
        thread_id: the thread.
        status: one of :data:`STATUSES`.
        checkpoints_total: checkpoints in every namespace (count).
        checkpoints_to_rewrite: checkpoints whose stored value or metadata changes (count).
        bytes_before: bytes in LangGraph's tables before (checkpoints, blobs, writes).
        bytes_after: bytes after conversion (estimated by a dry run, measured after a conversion).
        findings: ``[{"kind", "checkpoint_id", "checkpoint_ns", "detail", "blocking"}]``.
        first_difference: for ``integrity_mismatch`` / ``verification_failed``: where and both digests
            (plus ``langgraph_error`` when LangGraph's reader failed during the integrity check).
        head_messages_sha256: canonical digest of the root namespace head after materialization
            (``None`` when a blocking finding leaves the head's value unknown).
        backup_id: the backup holding the original rows (after a conversion).
        attempts: transactions tried (count).
        duration_s: wall time (seconds).
        error, hint: what went wrong and what to do, for non-success statuses.
    """

    thread_id: str
    status: str = "needs_conversion"
    checkpoints_total: int = 0
    checkpoints_to_rewrite: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)
    first_difference: dict[str, Any] | None = None
    head_messages_sha256: str | None = None
    backup_id: str | None = None
    attempts: int = 0
    duration_s: float = 0.0
    error: str | None = None
    hint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        return asdict(self)


@dataclass
class _Entry:
    ns: str
    tup: Any
    value: list[Any] | None
    rewrite: bool
    digest: str | None = None  # messages_sha256(value); None when the value is unknown
    target_version: Any = None  # the messages version the rewrite stores under (see _plan_versions)


class _DigestCache:
    """:func:`deerflow.digest.messages_sha256` with each message's canonical JSON made once.

    The one-pass values of neighbouring checkpoints share message objects, so
    hashing N checkpoints costs O(total messages) JSON encodings only once per
    distinct message. ``json.dumps`` of a list with ``separators=(',', ':')``
    is ``'[' + ','.join(items) + ']'``, so the digest is the same bytes.
    The cache keeps a reference to every message it saw (ids stay unique).
    """

    def __init__(self) -> None:
        self._json: dict[int, tuple[Any, str]] = {}

    def __call__(self, messages: list[Any]) -> str:
        parts = []
        for m in messages:
            hit = self._json.get(id(m))
            if hit is None or hit[0] is not m:
                text = json.dumps(canonical_messages([m])[0], sort_keys=True, ensure_ascii=False,
                                  separators=(",", ":"))
                hit = (m, text)
                self._json[id(m)] = hit
            parts.append(hit[1])
        return hashlib.sha256(("[" + ",".join(parts) + "]").encode("utf-8")).hexdigest()


class _Abort(Exception):
    def __init__(self, status: str, error: str, hint: str, difference: dict[str, Any] | None = None):
        super().__init__(error)
        self.status, self.error, self.hint, self.difference = status, error, hint, difference


def _config(thread_id: str, ns: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


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


def _needs_rewrite(tup: Any, value: list[Any]) -> bool:
    stored = tup.checkpoint["channel_values"].get("messages")
    metadata_delta = tup.metadata.get(CHECKPOINT_MODE_METADATA_KEY) is not None or (
        isinstance(tup.metadata.get(COUNTERS_METADATA_KEY), dict)
        and "messages" in tup.metadata[COUNTERS_METADATA_KEY]
    )
    plain = isinstance(stored, list)
    has_version = "messages" in tup.checkpoint.get("channel_versions", {})
    return metadata_delta or (not plain and (bool(value) or has_version))


def _load(session: ConversionSession, thread_id: str, report: ThreadReport) -> list[_Entry]:
    # The saver returns pending writes in writes_sort_key (task_path, task_id, idx) order;
    # task_path (a property of the task) is read only to flag order-unknown parallel writes.
    paths = session.task_paths(thread_id)
    digests = _DigestCache()
    entries: list[_Entry] = []
    for ns in session.namespaces(thread_id):
        tuples = {t.config["configurable"]["checkpoint_id"]: t
                  for t in session.saver.list(_config(thread_id, ns))}
        nodes = [
            CheckpointNode(
                checkpoint_id=cid,
                parent_id=t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None,
                stored=t.checkpoint["channel_values"].get("messages"),
                writes=[(w[0], w[2], paths.get((ns, cid, w[0])))
                        for w in t.pending_writes or [] if w[1] == "messages"],
                version=(t.checkpoint.get("channel_versions") or {}).get("messages"),
            )
            for cid, t in tuples.items()
        ]
        for item in materialize_namespace(nodes):
            if isinstance(item, Finding):
                report.findings.append({**asdict(item), "checkpoint_ns": ns})
                continue
            assert isinstance(item, Materialized)
            tup = tuples[item.checkpoint_id]
            rewrite = item.messages is not None and _needs_rewrite(tup, item.messages)
            digest = None if item.messages is None else digests(item.messages)
            entries.append(_Entry(ns, tup, item.messages, rewrite, digest))
    return entries


def _check_against_langgraph(session: ConversionSession, thread_id: str, entries: list[_Entry]) -> None:
    """The integrity check: every checkpoint's one-pass digest against LangGraph's own delta reader.

    Raises:
        _Abort: ``integrity_mismatch`` at the first checkpoint (walk order) where the
            digests differ or LangGraph's reader fails; ``first_difference`` is
            ``{checkpoint_id, checkpoint_ns, onepass_sha256, langgraph_sha256}``
            (``langgraph_sha256`` ``None`` and ``langgraph_error`` set when the reader
            raised or returned something that is not a message list).
    """
    accessor = CheckpointStateAccessor.bind(session.saver, mode="delta")
    for e in entries:
        cid = e.tup.config["configurable"]["checkpoint_id"]
        error = None
        try:
            snapshot = accessor.get(_config(thread_id, e.ns, cid))
            theirs: str | None = messages_sha256(snapshot.values.get("messages") or [])
        except Exception as exc:  # noqa: BLE001 - a reader failure is a difference, reported
            theirs, error = None, f"{type(exc).__name__}: {exc}"
        ours = e.digest
        if theirs != ours:
            difference = {"checkpoint_id": cid, "checkpoint_ns": e.ns, "onepass_sha256": ours,
                          "langgraph_sha256": theirs}
            if error is not None:
                difference["langgraph_error"] = error
            raise _Abort(
                "integrity_mismatch",
                f"one-pass materialization differs from LangGraph's reader at checkpoint {cid}"
                + (f" (namespace {e.ns})" if e.ns else "")
                + (f"; LangGraph's reader failed: {error}" if error else ""),
                "The stored delta history does not replay consistently. Inspect the thread's history; "
                "do not convert until an operator has decided which value is right.",
                difference,
            )


def _plan_versions(session: ConversionSession, entries: list[_Entry]) -> None:
    """Choose the ``messages`` version each rewritten checkpoint stores its value under.

    SQLite stores values inline, so every checkpoint keeps its version.
    Postgres keeps one blob per ``(namespace, version)``: checkpoints normally
    share a version only when they share a value, but below a branch point
    LangGraph's reader applies sibling writes, so two checkpoints can share a
    version yet read differently; the later one (in walk order) then gets its
    own version ``<version>~dfa<n>``, which sorts right after the original and
    before every later version (StateGraph nodes trigger on their own
    ``branch:to:*`` channels, so ``next`` is unchanged). Sets
    ``_Entry.target_version``; writes nothing.
    """
    version_digest: dict[tuple[str, str], str | None] = {}
    for e in entries:
        versions = e.tup.checkpoint.get("channel_versions") or {}
        if not e.rewrite or "messages" not in versions:
            continue
        version = versions["messages"]
        if session.dialect != "postgres":
            e.target_version = version
            continue
        candidate, n = str(version), 0
        while version_digest.setdefault((e.ns, candidate), e.digest) != e.digest:
            n += 1
            candidate = f"{version}~dfa{n}"
        e.target_version = candidate


def _rewritten(thread_id: str, e: _Entry) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(config, checkpoint, metadata, new_versions)`` to ``put`` for one rewritten checkpoint.

    Raises:
        _Abort: ``blocked`` when the checkpoint has messages but no ``messages`` channel version.
    """
    tup = e.tup
    checkpoint = dict(tup.checkpoint)
    checkpoint["channel_values"] = dict(checkpoint["channel_values"])
    versions = checkpoint.get("channel_versions") or {}
    new_versions: dict[str, Any] = {}
    if "messages" in versions:
        checkpoint["channel_values"]["messages"] = e.value
        if e.target_version != versions["messages"]:
            checkpoint["channel_versions"] = {**versions, "messages": e.target_version}
        new_versions["messages"] = e.target_version
    elif e.value:
        raise _Abort("blocked", f"checkpoint {checkpoint['id']} has messages but no channel version",
                     "Leave this thread in delta mode and report the thread shape.")
    else:
        checkpoint["channel_values"].pop("messages", None)
    parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
    return _config(thread_id, e.ns, parent), checkpoint, _clean_metadata(tup.metadata), new_versions


def _estimate_after(session: ConversionSession, thread_id: str, entries: list[_Entry], bytes_before: int) -> int:
    """Bytes the thread will occupy after conversion: ``bytes_before`` minus what is replaced plus what is written.

    Each rewritten ``checkpoints`` row is built and serialized as the saver's
    ``put`` stores it (SQLite: the checkpoint blob and metadata JSON;
    Postgres: the two JSONB documents, sized by the server) and replaces the
    stored row. On Postgres each planned ``messages`` blob (one per namespace
    and version) also replaces the blob stored at the original version.
    """
    serde = session.saver.serde
    _plan_versions(session, entries)
    rewrites = [e for e in entries if e.rewrite]
    sizes = session.checkpoint_row_sizes(thread_id)
    removed = sum(sizes.get((e.ns, e.tup.config["configurable"]["checkpoint_id"]), 0) for e in rewrites)
    added = 0
    if session.dialect == "sqlite":
        for e in rewrites:
            config, checkpoint, metadata, _versions = _rewritten(thread_id, e)
            added += len(serde.dumps_typed(checkpoint)[1]) + len(
                json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode("utf-8", "ignore"))
        return bytes_before - removed + added
    from psycopg.types.json import Jsonb

    documents: list[Any] = []
    for e in rewrites:
        config, checkpoint, metadata, _versions = _rewritten(thread_id, e)
        inline = {k: v for k, v in checkpoint["channel_values"].items()
                  if v is None or isinstance(v, (str, int, float, bool))}
        documents.append(Jsonb({**checkpoint, "channel_values": inline}))
        documents.append(Jsonb(get_serializable_checkpoint_metadata(config, metadata)))
    if documents:
        added += int(session.query("SELECT COALESCE(SUM(pg_column_size(d)), 0) AS b FROM unnest(?::jsonb[]) AS d",
                                   [documents])[0]["b"])
    blobs = session.messages_blob_sizes(thread_id)
    old_seen: set[tuple[str, str]] = set()
    new_seen: set[tuple[str, str]] = set()
    for e in rewrites:
        if e.target_version is None:
            continue
        old = (e.ns, str(e.tup.checkpoint["channel_versions"]["messages"]))
        if old not in old_seen:
            old_seen.add(old)
            removed += blobs.get(old, 0)
        new = (e.ns, str(e.target_version))
        if new not in new_seen:
            new_seen.add(new)
            added += len(serde.dumps_typed(e.value)[1])
    return bytes_before - removed + added


def _write(session: ConversionSession, thread_id: str, entries: list[_Entry]) -> None:
    _plan_versions(session, entries)
    cleared: set[tuple[str, str]] = set()
    for e in entries:
        if not e.rewrite:
            continue
        config, checkpoint, metadata, new_versions = _rewritten(thread_id, e)
        if session.dialect == "postgres" and "messages" in new_versions:
            key = (e.ns, str(new_versions["messages"]))
            if key not in cleared:
                # The saver's blob upsert keeps an existing row (ON CONFLICT DO NOTHING): clear it first.
                session.execute("DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                                "AND channel = 'messages' AND version = ?", [thread_id, e.ns, key[1]])
                cleared.add(key)
        session.saver.put(config, checkpoint, metadata, new_versions)


def _verify(session: ConversionSession, thread_id: str, entries: list[_Entry]) -> None:
    expected = {(e.ns, e.tup.config["configurable"]["checkpoint_id"]): e.digest for e in entries}
    accessor = CheckpointStateAccessor.bind(session.saver, mode="full")
    for ns in {e.ns for e in entries}:
        for tup in session.saver.list(_config(thread_id, ns)):
            cid = tup.config["configurable"]["checkpoint_id"]
            if (ns, cid) not in expected:
                continue  # written by someone else after the analysis; the watermark check decides
            stored = tup.checkpoint["channel_values"].get("messages")
            if isinstance(stored, _DeltaSnapshot) or checkpoint_metadata_uses_delta(tup.metadata):
                raise _Abort("verification_failed", f"checkpoint {cid} still carries delta storage after rewrite",
                             "Nothing was changed (rolled back). Report the thread shape.",
                             {"checkpoint_id": cid, "checkpoint_ns": ns})
            got = messages_sha256(stored if isinstance(stored, list) else [])
            want = expected.get((ns, cid))
            if want is not None and got != want:
                raise _Abort("verification_failed", f"full-mode read of {cid} differs from the materialized value",
                             "Nothing was changed (rolled back). Report the thread shape.",
                             {"checkpoint_id": cid, "checkpoint_ns": ns, "expected_sha256": want, "full_mode_sha256": got})
        newest = max(cid for (n, cid) in expected if n == ns)  # the head as analyzed, not a newcomer's
        head = accessor.get(_config(thread_id, ns, newest))
        cid = head.config["configurable"]["checkpoint_id"]
        got = messages_sha256(head.values.get("messages") or [])
        if got != expected.get((ns, cid), got):
            raise _Abort("verification_failed", f"full-mode accessor read of head {cid} differs",
                         "Nothing was changed (rolled back).",
                         {"checkpoint_id": cid, "checkpoint_ns": ns, "expected_sha256": expected[(ns, cid)],
                          "full_mode_sha256": got})


def _head_digest(session: ConversionSession, thread_id: str, entries: list[_Entry]) -> str | None:
    """Digest at the root namespace's head (its newest checkpoint, as LangGraph picks it);
    ``None`` when that checkpoint has no trustworthy value (unreachable or blocked)."""
    head = session.query("SELECT MAX(checkpoint_id) AS head FROM checkpoints WHERE thread_id = ? "
                         "AND checkpoint_ns = ''", [thread_id])[0]["head"]
    for e in entries:
        if e.ns == "" and e.tup.config["configurable"]["checkpoint_id"] == head:
            return e.digest
    return None


def _analyze(session: ConversionSession, thread_id: str, report: ThreadReport) -> list[_Entry]:
    entries = _load(session, thread_id, report)
    report.checkpoints_total = len(entries) + sum(
        1 for f in report.findings if f["blocking"] and f["kind"] in ("dangling_parent", "cycle"))
    report.checkpoints_to_rewrite = sum(1 for e in entries if e.rewrite)
    report.head_messages_sha256 = _head_digest(session, thread_id, entries)
    blocking = [f for f in report.findings if f["blocking"]]
    if blocking:
        raise _Abort("blocked", f"{len(blocking)} blocking finding(s); first: {blocking[0]['detail']}",
                     "The thread's history cannot be replayed completely; it stays in delta mode.")
    return entries


def dry_run_thread(database: DatabaseConfig, thread_id: str, *, integrity: bool = True) -> ThreadReport:
    """Analyze one thread without writing: what conversion would rewrite and cost.

    Reads one consistent snapshot and takes no lock, so DeerFlow keeps
    writing meanwhile (SQLite: no write lock; Postgres: a read-only transaction).

    Args:
        database: the checkpoint database.
        thread_id: the thread.
        integrity: also compare every checkpoint with LangGraph's own delta reader.

    Returns:
        A :class:`ThreadReport` with status ``already_full``, ``needs_conversion``,
        ``blocked``, ``integrity_mismatch`` or ``not_found``; ``bytes_after`` is an estimate.
    """
    started = time.monotonic()
    report = ThreadReport(thread_id=thread_id)
    with open_session(database, write=False) as session:
        report.attempts = 1
        try:
            if session.watermark(thread_id)[0] == 0:
                raise _Abort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")
            report.bytes_before = session.stored_bytes(thread_id)
            entries = _analyze(session, thread_id, report)
            if not report.checkpoints_to_rewrite:
                report.status, report.bytes_after = "already_full", report.bytes_before
            else:
                if integrity:
                    _check_against_langgraph(session, thread_id, entries)
                report.bytes_after = _estimate_after(session, thread_id, entries, report.bytes_before)
                report.status = "needs_conversion"
        except _Abort as exc:
            _record(report, exc)
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def _record(report: ThreadReport, exc: _Abort) -> None:
    report.status, report.error, report.hint = exc.status, exc.error, exc.hint
    report.first_difference = exc.difference


def convert_thread(
    database: DatabaseConfig,
    thread_id: str,
    *,
    integrity: bool = True,
    max_attempts: int = 3,
    note: str = "",
    before_commit: Callable[[ConversionSession], None] | None = None,
) -> ThreadReport:
    """Convert one thread from delta to full storage, verified, in one transaction.

    Args:
        database: the checkpoint database (sqlite or postgres).
        thread_id: the thread.
        integrity: compare with LangGraph's reader before writing (recommended).
        max_attempts: transactions to try when new checkpoints arrive meanwhile (count).
        note: stored with the backup (e.g. the job id).
        before_commit: test hook called with the session just before commit.

    Returns:
        A :class:`ThreadReport`: ``converted`` (with ``backup_id``), ``already_full``
        (nothing written, rows byte-identical), or a failure status with
        ``error`` and ``hint``; on failure nothing was written.
    """
    started = time.monotonic()
    report = ThreadReport(thread_id=thread_id)
    for attempt in range(1, max_attempts + 1):
        report = ThreadReport(thread_id=thread_id, attempts=attempt)
        with open_session(database) as session:
            try:
                _convert_once(session, thread_id, report, integrity=integrity, note=note, before_commit=before_commit)
            except _Abort as exc:
                _record(report, exc)
        if report.status != "changed_during_conversion":
            break
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def _convert_once(session: ConversionSession, thread_id: str, report: ThreadReport, *, integrity: bool,
                  note: str, before_commit: Callable[[ConversionSession], None] | None) -> None:
    session.lock_thread(thread_id)
    mark = session.watermark(thread_id)
    if mark[0] == 0:
        raise _Abort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")
    report.bytes_before = session.stored_bytes(thread_id)
    entries = _analyze(session, thread_id, report)
    if not report.checkpoints_to_rewrite:
        report.status, report.bytes_after = "already_full", report.bytes_before
        return
    if integrity:
        _check_against_langgraph(session, thread_id, entries)
    session.ensure_backup_tables()
    backup_id = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    backups.copy_to_backup(session, backup_id, thread_id, note=note)
    _write(session, thread_id, entries)
    # A writer that committed meanwhile (Postgres READ COMMITTED) would show up in the verification
    # as unconverted rows: that is a retry, not a verification failure.
    _check_watermark(session, thread_id, mark)
    _verify(session, thread_id, entries)
    if before_commit is not None:
        before_commit(session)
    _check_watermark(session, thread_id, mark)
    report.bytes_after = session.stored_bytes(thread_id)
    report.backup_id = backup_id
    report.status = "converted"
    session.commit()



def _check_watermark(session: ConversionSession, thread_id: str, mark: tuple[int, str | None]) -> None:
    if session.watermark(thread_id) != mark:
        raise _Abort("changed_during_conversion", "new checkpoints were written while converting",
                     "Retried automatically; if it keeps happening, convert when the thread is idle.")


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
            entries = _analyze(session, info.thread_id, report)
            for e in entries:
                key = (e.ns, e.tup.config["configurable"]["checkpoint_id"])
                if key in converted and converted[key] != e.digest:
                    raise _Abort("verification_failed", f"restored checkpoint {key[1]} reads differently",
                                 "Nothing was changed (rolled back).",
                                 {"checkpoint_id": key[1], "checkpoint_ns": key[0],
                                  "converted_sha256": converted[key], "restored_sha256": e.digest})
            report.bytes_after = session.stored_bytes(info.thread_id)
            report.status = "reverted"
            session.commit()
        except _Abort as exc:
            _record(report, exc)
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def _stored_digests(session: ConversionSession, thread_id: str) -> dict[tuple[str, str], str]:
    out = {}
    for ns in session.namespaces(thread_id):
        for tup in session.saver.list(_config(thread_id, ns)):
            stored = tup.checkpoint["channel_values"].get("messages")
            is_seed, value, _ = stored_seed(stored)
            if is_seed and isinstance(value, list):
                out[(ns, tup.config["configurable"]["checkpoint_id"])] = messages_sha256(value)
    return out
