"""Materialize-and-convert: delta threads rewritten to full storage, verified and revertible.

Public entry points: :func:`dry_run_thread`, :func:`convert_thread`,
:func:`revert_thread`, :func:`list_backups`, :func:`purge_backup`.
"""

from deerflow.convert.backups import (
    BackupAlreadyPurgedError,
    BackupInfo,
    BackupNotFoundError,
    list_backups,
    purge_backup,
)
from deerflow.convert.converter import STATUSES, ThreadReport, convert_thread, dry_run_thread, revert_thread

__all__ = [
    "STATUSES",
    "BackupInfo",
    "BackupAlreadyPurgedError",
    "BackupNotFoundError",
    "ThreadReport",
    "convert_thread",
    "dry_run_thread",
    "list_backups",
    "purge_backup",
    "revert_thread",
]
