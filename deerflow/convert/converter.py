"""Materialize-and-convert: rewrite a delta thread so a full-mode process can read it.

The spec's remediation for a 409 ("materialize and convert its checkpoints
before using full mode"), done per thread in one transaction
(:mod:`deerflow.storage.sessions`):

1. lock the thread and record its watermark (checkpoint count, newest id);
2. read each namespace through the saver a page at a time
   (:mod:`deerflow.convert.reading`), sharing one object per distinct message
   (:class:`~deerflow.convert.encoding.SharingDecoder`);
3. walk the checkpoint tree once (:mod:`deerflow.convert.onepass`); where
   the replay rule and LangGraph's reader disagree, the value written is
   LangGraph's reading (:mod:`deerflow.convert.reader_values`; a stored
   ``None`` the savers read differently keeps the replay rule's value and is
   recorded as a ``reader_departure`` finding); with the
   integrity check on, each namespace's stored rows are first read as
   LangGraph's own delta reader reads them (its read rule replayed along the
   tree, real ``get_state`` reads at a sample:
   :class:`~deerflow.convert.integrity.IntegrityCheck`) and every
   checkpoint's one-pass value is compared; a difference or a blocking
   finding rolls everything back and is reported;
4. as each checkpoint's value is known, re-``put`` it through the saver
   (:mod:`deerflow.convert.full_writer`, rows from :mod:`deerflow.convert.full_rows`):
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

import time
from collections.abc import Callable

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import backups
from deerflow.convert.encoding import MessageDigester
from deerflow.convert.full_estimate import Estimate as _Estimate
from deerflow.convert.full_rows import VersionPlan as _VersionPlan  # noqa: F401 - re-exported
from deerflow.convert.full_rows import needs_rewrite as _needs_rewrite
from deerflow.convert.full_rows import rewritten as _rewritten  # noqa: F401 - re-exported
from deerflow.convert.full_writer import Writer as _Writer
from deerflow.convert.integrity import IntegrityCheck
from deerflow.convert.onepass import stored_seed
from deerflow.convert.reader_values import ReaderValues, chained
from deerflow.convert.reading import iter_checkpoints
from deerflow.convert.report import STATUSES, ThreadReport
from deerflow.convert.report import Abort as _Abort
from deerflow.convert.report import record as _record
from deerflow.convert.walk import Walk as _Walk
from deerflow.convert.walk import check_watermark as _check_watermark
from deerflow.convert.walk import run_attempts
from deerflow.convert.walk import share_decoded_messages as _share_decoded_messages
from deerflow.storage.sessions import ConversionSession, open_session

__all__ = ["STATUSES", "ThreadReport", "convert_thread", "dry_run_thread", "revert_thread"]


def _integrity_check(session: ConversionSession, thread_id: str, walk: _Walk) -> IntegrityCheck:
    """The integrity check on ``walk``'s reads (:class:`~deerflow.convert.integrity.IntegrityCheck`)."""
    check = IntegrityCheck(session, thread_id, walk)
    walk.on_namespace = check.begin_namespace
    return check


def _reader_values(session: ConversionSession, thread_id: str, walk: _Walk) -> ReaderValues:
    """LangGraph's readings where the replay rule departs from them (:mod:`deerflow.convert.reader_values`)."""
    return ReaderValues(session.saver, thread_id, lambda: walk.writes, walk.digest)


def dry_run_thread(database: DatabaseConfig, thread_id: str, *, integrity: bool = True,
                   acknowledge_branch_ambiguous: bool = False) -> ThreadReport:
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
    report = ThreadReport(thread_id=thread_id, acknowledged=_acknowledged(acknowledge_branch_ambiguous))
    with open_session(database, write=False) as session:
        report.attempts = 1
        try:
            if session.watermark(thread_id)[0] == 0:
                raise _Abort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")
            report.bytes_before = session.stored_bytes(thread_id)
            walk = _Walk(session, thread_id, report, _needs_rewrite)
            estimate = _Estimate(session, thread_id, report.bytes_before)
            check = _integrity_check(session, thread_id, walk) if integrity else None
            values = _reader_values(session, thread_id, walk)
            walk.on_namespace = chained(values.begin_namespace, check.begin_namespace if check is not None else None)
            for e in walk:
                values.apply(e, report)
                if check is not None:
                    check.compare(e)
                if e.rewrite:
                    estimate.add(e)
            walk.raise_if_blocked(frozenset(report.acknowledged))
            if not report.checkpoints_to_rewrite:
                report.status, report.bytes_after = "already_full", report.bytes_before
            else:
                if check is not None:
                    check.raise_if_different()
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
    # The integrity check rides on the writing walk: each namespace is read, checked against LangGraph's
    # read rule, then written; a difference is raised after the walk and the rollback undoes every write.
    check = _integrity_check(session, thread_id, walk) if integrity else None
    writer = _Writer(session, thread_id, note)
    values = _reader_values(session, thread_id, walk)
    # LangGraph's readings are taken before the namespace's rows are rewritten; stored where the rule departs
    walk.on_namespace = chained(values.begin_namespace, check.begin_namespace if check is not None else None,
                                writer.begin_namespace)
    with writer.pipelined():
        for e in walk:
            values.apply(e, report)
            if check is not None:
                check.compare(e)
            writer.see(e)
            if e.rewrite:
                writer.write(e)
    walk.raise_if_blocked(frozenset(report.acknowledged))  # met while writing: the rollback undoes every write
    if not report.checkpoints_to_rewrite:
        report.status, report.bytes_after = "already_full", report.bytes_before
        return
    if check is not None:
        check.raise_if_different()
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
            values = _reader_values(session, info.thread_id, walk)
            walk.on_namespace = values.begin_namespace
            scratch = ThreadReport(thread_id=info.thread_id)
            for e in walk:
                values.apply(e, scratch)  # the conversion stored LangGraph's reading where the rule departs
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
