"""Materialize-and-convert (delta -> full) and compaction (full -> delta), verified and revertible.

Public entry points: :func:`dry_run_thread`, :func:`convert_thread`,
:func:`dry_run_compact`, :func:`compact_thread`, :func:`revert_thread`,
:func:`list_backups`, :func:`purge_backup`, :func:`reclaim_space`; the canonical message
digests every rewrite is verified by (:mod:`deerflow.convert.digest`, the fixture manifest's
definition).
"""

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports

#: Each public name's submodule: imported when the name is first read (:mod:`deerflow._lazy`).
_EXPORTS = {
    "STATUSES": "report", "ThreadReport": "report",
    "BackupAlreadyPurgedError": "backups", "BackupInfo": "backups", "BackupNotFoundError": "backups",
    "list_backups": "backups", "purge_backup": "backups",
    "compact_thread": "compactor", "dry_run_compact": "compactor",
    "convert_thread": "converter", "dry_run_thread": "converter", "revert_thread": "converter",
    "LANGGRAPH_TABLES": "reclaim", "ReclaimReport": "reclaim", "database_sizes": "reclaim", "reclaim_space": "reclaim",
    "EMPTY_MESSAGES_SHA256": "digest", "canonical_messages": "digest", "channels_sha256": "digest",
    "messages_sha256": "digest",
    "MAX_SUPERSTEPS": "compact_plan",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from deerflow.convert.backups import (
        BackupAlreadyPurgedError,
        BackupInfo,
        BackupNotFoundError,
        list_backups,
        purge_backup,
    )
    from deerflow.convert.compact_plan import MAX_SUPERSTEPS
    from deerflow.convert.compactor import compact_thread, dry_run_compact
    from deerflow.convert.converter import convert_thread, dry_run_thread, revert_thread
    from deerflow.convert.digest import EMPTY_MESSAGES_SHA256, canonical_messages, channels_sha256, messages_sha256
    from deerflow.convert.reclaim import LANGGRAPH_TABLES, ReclaimReport, database_sizes, reclaim_space
    from deerflow.convert.report import STATUSES, ThreadReport

__all__ = [
    "BackupAlreadyPurgedError",
    "BackupInfo",
    "BackupNotFoundError",
    "EMPTY_MESSAGES_SHA256",
    "LANGGRAPH_TABLES",
    "MAX_SUPERSTEPS",
    "ReclaimReport",
    "STATUSES",
    "ThreadReport",
    "canonical_messages",
    "channels_sha256",
    "compact_thread",
    "convert_thread",
    "database_sizes",
    "dry_run_compact",
    "dry_run_thread",
    "list_backups",
    "messages_sha256",
    "purge_backup",
    "reclaim_space",
    "revert_thread",
]
