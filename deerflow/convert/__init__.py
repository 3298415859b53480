"""Materialize-and-convert (delta -> full) and compaction (full -> delta), verified and revertible.

Public entry points: :func:`dry_run_thread`, :func:`convert_thread`,
:func:`dry_run_compact`, :func:`compact_thread`, :func:`revert_thread`,
:func:`list_backups`, :func:`purge_backup`, :func:`reclaim_space`.
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
    "ReclaimReport": "reclaim", "reclaim_space": "reclaim",
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
    from deerflow.convert.compactor import compact_thread, dry_run_compact
    from deerflow.convert.converter import convert_thread, dry_run_thread, revert_thread
    from deerflow.convert.reclaim import ReclaimReport, reclaim_space
    from deerflow.convert.report import STATUSES, ThreadReport

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
