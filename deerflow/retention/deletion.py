"""Delete whole threads through the saver's own ``delete_thread``, backed up, verified, one transaction each."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterable
from typing import Any

from deerflow.convert import backups
from deerflow.retention.prune import _store
from deerflow.retention.report import PruneReport, RetentionAbort

__all__ = ["delete_thread", "delete_threads"]


def delete_threads(target: Any, thread_ids: Iterable[str], **options: Any) -> list[PruneReport]:
    """:func:`delete_thread` for each id, in order; one report per thread."""
    return [delete_thread(target, thread_id, **options) for thread_id in thread_ids]


def delete_thread(target: Any, thread_id: str, *, dry_run: bool = False, backup: bool = True, note: str = "",
                  max_attempts: int = 3, protect: Iterable[str] = ()) -> PruneReport:
    """Delete every checkpoint, write and blob of one thread (the saver's ``delete_thread``), in one transaction.

    Args:
        target: a ``DatabaseConfig`` (sqlite or postgres) or an ``InMemorySaver``.
        thread_id: the thread.
        dry_run: report what would go; write nothing.
        backup: back up the whole thread first (revertible with :func:`deerflow.retention.revert_prune`).
        note: stored with the backup.
        max_attempts: transactions to try when a live writer adds a checkpoint meanwhile (count).
        protect: checkpoint ids that must stay (resume targets): a thread holding one is not deleted.

    Returns:
        A :class:`PruneReport` with status ``deleted`` / ``would_delete``, or ``not_found`` /
        ``blocked`` (it holds a protected checkpoint) / ``changed_during_prune`` (nothing written).
    """
    started = time.monotonic()
    report = PruneReport(thread_id=thread_id, rule="delete_thread")
    for attempt in range(1, max_attempts + 1):
        report = PruneReport(thread_id=thread_id, rule="delete_thread", attempts=attempt)
        try:
            with _store(target, thread_id, write=not dry_run) as store:
                _delete_once(store, thread_id, report, dry_run=dry_run, backup=backup, note=note,
                             protect=set(protect))
        except RetentionAbort as exc:
            report.fail(exc)
        if report.status != "changed_during_prune":
            break
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def _ids(store: Any, thread_id: str) -> list[str]:
    rows, _writes, _blobs = store.sizes(thread_id)
    return sorted(cid for _ns, cid in rows)


def _delete_once(store: Any, thread_id: str, report: PruneReport, *, dry_run: bool, backup: bool, note: str,
                 protect: set[str]) -> None:
    mark = store.watermark(thread_id)
    if mark[0] == 0:
        raise RetentionAbort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")
    report.bytes_before = store.stored_bytes(thread_id)
    report.deleted_checkpoint_ids = _ids(store, thread_id)
    held = sorted(protect & set(report.deleted_checkpoint_ids))
    if held:
        report.deleted_checkpoint_ids = []
        raise RetentionAbort("blocked", f"thread {thread_id!r} holds protected checkpoint {held[0]}",
                             "A resume target is protected; drop --protect for it or prune with --keep-last.")
    if dry_run:
        report.status, report.bytes_after = "would_delete", 0
        return
    if backup and store.persistent:
        report.backup_id = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        backups.copy_to_backup(store.session, report.backup_id, thread_id, note=note or "prune:delete_thread",
                               whole_thread=True)
    if store.watermark(thread_id) != mark:
        raise RetentionAbort("changed_during_prune", "new checkpoints were written while deleting",
                             "Retried automatically; delete when the thread is idle.")
    store.saver.delete_thread(thread_id)
    if store.watermark(thread_id)[0] or store.stored_bytes(thread_id):
        raise RetentionAbort("changed_during_prune", "rows of the thread remain after delete_thread (a live writer)",
                             "Retried automatically; delete when the thread is idle.")
    report.bytes_after = 0
    report.status = "deleted"
    store.session.commit() if store.persistent else store.commit()
