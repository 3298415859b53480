"""Materialize-and-convert (delta -> full) and compaction (full -> delta), verified and revertible.

Public entry points: :func:`dry_run_thread`, :func:`convert_thread`,
:func:`dry_run_compact`, :func:`compact_thread`, :func:`revert_thread`,
:func:`list_backups`, :func:`purge_backup`, :func:`reclaim_space`.
"""

from deerflow.convert.backups import (
    BackupAlreadyPurgedError,
    BackupInfo,
    BackupNotFoundError,
    list_backups,
    purge_backup,
)
from deerflow.convert.compactor import compact_thread, dry_run_compact
from deerflow.convert.converter import STATUSES, ThreadReport, convert_thread, dry_run_thread, revert_thread
from deerflow.convert.reclaim import ReclaimReport, reclaim_space

__all__ = [
    "STATUSES",
    "BackupInfo",
    "BackupAlreadyPurgedError",
    "BackupNotFoundError",
    "ReclaimReport",
    "ThreadReport",
    "compact_thread",
    "convert_thread",
    "dry_run_compact",
    "dry_run_thread",
    "list_backups",
    "purge_backup",
    "reclaim_space",
    "revert_thread",
]
