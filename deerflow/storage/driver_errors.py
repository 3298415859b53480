"""Driver errors translated at the reader/session boundary into :class:`deerflow.errors.StorageError`.

The SQLite (``sqlite3``) and Postgres (``psycopg``, ``psycopg_pool``)
drivers raise their own classes; code above :mod:`deerflow.storage.sqlread` and
:mod:`deerflow.storage.sessions` sees one tree instead, the driver's
error kept as ``__cause__`` (and ``driver_error``)::

    sqlite3 OperationalError  locked, busy, disk I/O, unable to open, not a database  -> StorageUnavailableError
    sqlite3 OperationalError  attempt to write a readonly database                    -> StoragePermissionError
    sqlite3 any other Error   syntax error, no such table/column, constraint          -> StorageQueryError
    psycopg OperationalError  unreachable, server restarting, PoolTimeout             -> StorageUnavailableError
    psycopg InsufficientPrivilege, ReadOnlySqlTransaction                             -> StoragePermissionError
    psycopg any other Error   bad statement, missing table, constraint                -> StorageQueryError
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from deerflow.errors import StorageError, StoragePermissionError, StorageQueryError, StorageUnavailableError

__all__ = ["DRIVER_ERRORS", "driver_error", "is_sqlite_outage", "storage_error", "translated"]

#: The driver base classes translated here.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, psycopg.Error)

#: Words of a ``sqlite3.OperationalError`` / ``DatabaseError`` that mean the file cannot be used right now.
_SQLITE_OUTAGE_WORDS = ("locked", "busy", "disk i/o", "unable to open", "not a database", "malformed",
                        "disk is full", "database or disk is full")


def is_sqlite_outage(exc: BaseException) -> bool:
    """True for a SQLite error that says the file cannot be used now (locked, busy, disk I/O, unreadable).

    ``ProgrammingError``, ``IntegrityError`` and an ``OperationalError`` such
    as a syntax error or ``no such column`` are bugs, not outages.
    """
    if type(exc) not in (sqlite3.OperationalError, sqlite3.DatabaseError):
        return False
    text = str(exc).lower()
    return any(word in text for word in _SQLITE_OUTAGE_WORDS)


def _readonly_sqlite(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "readonly database" in str(exc).lower()


def storage_error(exc: BaseException) -> StorageError:
    """The :class:`StorageError` for a driver error (the caller raises it ``from exc``).

    Args:
        exc: an instance of one of :data:`DRIVER_ERRORS`.
    """
    if isinstance(exc, psycopg.errors.InsufficientPrivilege | psycopg.errors.ReadOnlySqlTransaction) \
            or _readonly_sqlite(exc):
        cls: type[StorageError] = StoragePermissionError
    elif isinstance(exc, psycopg.OperationalError) or is_sqlite_outage(exc):
        cls = StorageUnavailableError
    else:
        cls = StorageQueryError
    return cls(exc)


def driver_error(exc: BaseException) -> BaseException:
    """The driver's own error behind ``exc`` (its ``__cause__`` for a :class:`StorageError`), else ``exc``."""
    return exc.driver_error if isinstance(exc, StorageError) else exc


@contextmanager
def translated() -> Iterator[None]:
    """Re-raise a driver error from the block as its :class:`StorageError` (``raise ... from exc``)."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise storage_error(exc) from exc
