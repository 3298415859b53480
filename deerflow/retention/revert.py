"""Revert a prune (or a whole-thread deletion) from its backup, byte for byte, in one transaction."""

from __future__ import annotations

import time
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import backups
from deerflow.convert.report import ThreadReport
from deerflow.convert.walk import Walk
from deerflow.retention.reading import read_through_langgraph
from deerflow.retention.report import PruneReport, RetentionAbort
from deerflow.storage.sessions import open_session


def _no_rewrite(_tup: Any, _value: Any) -> bool:
    """The walk's ``needs_rewrite``: retention rewrites no checkpoint the walk hands on (it only reads values)."""
    return False

__all__ = ["revert_prune"]


def revert_prune(database: DatabaseConfig, backup_id: str) -> PruneReport:
    """Put a pruned thread's backed-up rows back (checkpoints, blobs, writes rows), verified, one transaction.

    Checkpoints written after the prune are kept. The restored thread is
    walked once; every checkpoint the thread held before the revert must read
    through LangGraph's reader exactly as it did (a rebased checkpoint stored
    LangGraph's reading, which its restored ancestors give again), else the
    revert rolls back.

    Returns:
        A :class:`PruneReport` with status ``reverted``, ``kept_checkpoint_ids`` the thread's ids after and
        ``restored_checkpoint_ids`` the ones put back,
        ``not_found`` (no active backup with that id) or ``verification_failed`` (with ``first_difference``);
        on failure nothing was written.
    """
    started = time.monotonic()
    report = PruneReport(thread_id="", rule="revert", attempts=1, backup_id=backup_id)
    with open_session(database) as session:
        try:
            info = backups.get_backup(session, backup_id)
            report.thread_id = info.thread_id
            session.lock_thread(info.thread_id)
            report.bytes_before = session.stored_bytes(info.thread_id)
            keys = sorted((r["checkpoint_ns"], r["checkpoint_id"]) for r in session.query(
                "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ?", [info.thread_id]))
            before = read_through_langgraph(session.saver, info.thread_id, keys)
            backups.restore_rows(session, backup_id)
            _verify(read_through_langgraph(session.saver, info.thread_id, keys), before)
        except backups.BackupNotFoundError as exc:
            report.status, report.error = "not_found", str(exc)
            report.hint = "List backups (manage.py conversion_backups) to find an active one."
            return report
        except RetentionAbort as exc:
            report.fail(exc)
            return report
        walk_report = ThreadReport(thread_id=info.thread_id)
        report.kept_checkpoint_ids = sorted(e.checkpoint_id
                                            for e in Walk(session, info.thread_id, walk_report, _no_rewrite))
        report.restored_checkpoint_ids = sorted(set(report.kept_checkpoint_ids) - {k[1] for k in keys})
        report.bytes_after = session.stored_bytes(info.thread_id)
        report.status = "reverted"
        session.commit()
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def _verify(after: dict[tuple[str, str], tuple[str, str]], before: dict[tuple[str, str], tuple[str, str]]) -> None:
    for key in sorted(before):
        if after.get(key) != before[key]:
            raise RetentionAbort("verification_failed", f"checkpoint {key[1]} reads differently after the revert "
                                 "(LangGraph's reader)", "Nothing was changed (rolled back). Report the thread shape.",
                                 {"checkpoint_ns": key[0], "checkpoint_id": key[1], "before": list(before[key]),
                                  "after": list(after.get(key) or ())})
