"""Outages: the checkpoint database, the dashboard's own database or the Celery broker cannot be reached.

:func:`describe_outage` turns such an error into the registry's
:class:`~dashboard.errors.registry.ErrorView` (HTTP 503, operator words, no
traceback) and says which service, where, why, and what to do::

    checkpoint_database_unavailable   psycopg.OperationalError (incl. the pool's PoolTimeout), SQLite
                                      locked / busy / unreadable / not a database (:func:`is_sqlite_outage`):
                                      the saver's database
    checkpoint_database_read_only     SQLite "attempt to write a readonly database" (the file, its directory or
                                      its journal may not be written; a WAL file whose -shm cannot be made),
                                      psycopg ReadOnlySqlTransaction (a read-only server or transaction)
    checkpoint_disk_io_error          SQLite "disk I/O error" / "database or disk is full": the file system
                                      failed a read or write
    checkpoint_tables_missing         the database has no LangGraph checkpoint tables
    summary_tables_missing            the dashboard's dfa_* summary tables were dropped under this process
    checkpoint_database_permission    the database role may not do what was asked
    dashboard_database_unavailable    Django's OperationalError / InterfaceError (users, sessions, jobs), and its
                                      ProgrammingError when Postgres lacks a table or column (an unmigrated schema)
    broker_unavailable                kombu.exceptions.OperationalError, redis ConnectionError / TimeoutError

Errors from Django's database arrive wrapped by Django (``django.db.utils``);
errors from the checkpoint saver arrive raw (psycopg, sqlite3) from LangGraph,
or as :class:`deerflow.errors.StorageError` (the driver's error as its cause)
from ``deerflow``'s own SQL, which is how the two are told apart.

A SQL bug is not an outage: a SQLite ``ProgrammingError``, ``IntegrityError``
or an ``OperationalError`` such as a syntax error or ``no such column`` (all
``sqlite3.DatabaseError``) goes on as the 500 it is.
"""

from __future__ import annotations

import re
import sqlite3

import kombu.exceptions
import psycopg
import psycopg_pool
import redis.exceptions
from django.conf import settings
from django.db import utils as db_utils
from kombu.utils.url import maybe_sanitize_url

from dashboard.brokers import broker_kind
from deerflow.errors import StorageError
from deerflow.inventory.summary import is_summary_table_missing
from deerflow.storage import ServerUnreachable, driver_error, is_wal_file
from deerflow.storage import is_sqlite_outage as _sqlite_unusable

__all__ = ["OUTAGES", "READ_ONLY_HINT", "describe_outage", "describe_storage_failure", "is_outage", "is_sqlite_outage",
           "postgres_where", "redact"]

#: What to do when the checkpoint database refuses writes (a writing job, or the thread summary's refresh).
READ_ONLY_HINT = ("This process may only read the checkpoint database. SQLite: let this process's user write "
                  "deerflow.db and its directory (the journal and WAL files are created there), and check the "
                  "file system is not mounted read-only. Postgres: connect as a role that may write "
                  "(GRANT INSERT, UPDATE, DELETE ON checkpoints, checkpoint_blobs, checkpoint_writes TO <role>) "
                  "to a primary, not a hot standby. Then retry; nothing was written.")
#: What to do when the file system under the SQLite file fails.
DISK_IO_HINT = ("The file system under the checkpoint file failed a read or write: check free space (df), the "
                "kernel log (dmesg) and that the directory is writable by this process; nothing was committed. "
                "Retry once it is fixed.")

#: The exception types :func:`describe_outage` recognises.
OUTAGES: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.errors.UndefinedTable,
    psycopg.errors.InsufficientPrivilege,
    psycopg.errors.ReadOnlySqlTransaction,
    sqlite3.DatabaseError,  # only the outages among them (is_sqlite_outage); a SQL bug goes on
    StorageError,  # deerflow's translation of the above: its driver error decides
    db_utils.OperationalError,
    db_utils.InterfaceError,
    db_utils.ProgrammingError,  # only an unmigrated schema (see is_outage); any other is a bug and goes on
    kombu.exceptions.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)

_START = "Start it (README) and retry."


def is_sqlite_outage(exc: BaseException) -> bool:
    """True for a SQLite error that means the checkpoint file cannot be used as configured.

    Locked, busy, disk I/O, unreadable, not a database
    (:func:`deerflow.storage.driver_errors.is_sqlite_outage`), read-only, or without
    LangGraph's or the summary's tables (a wrong file). Not a
    ``ProgrammingError``, ``IntegrityError``, syntax error or ``no such
    column``: those are bugs.
    """
    if _sqlite_unusable(exc):
        return True
    text = str(exc).lower()
    return type(exc) is sqlite3.OperationalError and ("readonly database" in text or "no such table" in text)


def _reason(exc: BaseException) -> str:
    """The cause in a few words: the first line, without libpq's repeated ``connection ... failed:`` prefix.

    A :class:`~deerflow.storage.pool.ServerUnreachable` gives the reason its pool's direct connection attempt got.
    """
    text = exc.reason if isinstance(exc, ServerUnreachable) else str(exc)
    line = (text.strip().splitlines() or [type(exc).__name__])[0].strip()
    if "failed: " in line:
        line = line.rsplit("failed: ", 1)[1]
    return line.rstrip(".") or type(exc).__name__


def postgres_where(url: str) -> str:
    """``host:port`` of a libpq URL or DSN (no credentials); ``"the configured server"`` if it does not parse."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured server"
    return f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"


def _probe_postgres(url: str) -> str:
    """Why a pool found no connection: connect once directly (3 s at most) and report what libpq says."""
    try:
        with psycopg.connect(url, connect_timeout=3):
            return "the server answers, but no pooled connection became free in time"
    except psycopg.Error as exc:
        return _reason(exc)


def _checkpoint_database() -> tuple[str, object]:
    """(config.yaml path, its ``database:`` block) of this process, or ``("config.yaml", None)``."""
    from dashboard.runtime import _runtime_if_started

    rt = _runtime_if_started()
    return (str(rt.config.path), rt.config.database) if rt else ("config.yaml", None)


def _checkpoint_postgres(exc: psycopg.Error) -> tuple[str, str, str]:
    path, database = _checkpoint_database()
    url = getattr(database, "postgres_url", None) or ""
    where = postgres_where(url)
    if is_summary_table_missing(exc):
        return _summary_tables_missing(exc)
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return ("checkpoint_tables_missing",
                f"The checkpoint database at {where} has no LangGraph checkpoint tables ({_reason(exc)}).",
                f"Point database.postgres_url in {path} at DeerFlow's checkpoint database "
                "(DeerFlow creates the tables when it first starts).")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return ("checkpoint_database_read_only",
                f"The checkpoint database at {where} refused a write: {_reason(exc)}.", READ_ONLY_HINT)
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return ("checkpoint_database_permission",
                f"The checkpoint database role at {where} is not allowed to do this: {_reason(exc)}.",
                "Browsing needs only SELECT on checkpoints, checkpoint_blobs, checkpoint_writes and "
                "checkpoint_migrations; conversions need a role that may write them.")
    # A plain PoolTimeout: connect once to tell why (FailFastConnectionPool's ServerUnreachable already did).
    probe = isinstance(exc, psycopg_pool.PoolTimeout) and not isinstance(exc, ServerUnreachable)
    reason = _probe_postgres(url) if probe else _reason(exc)
    if re.search(r'database ".*" does not exist', reason):  # the server answers; the URL names no database
        return ("checkpoint_database_unavailable",
                f"The checkpoint database (database.postgres_url in {path}) cannot be reached.",
                f"PostgreSQL at {where} answers, but {reason.removeprefix('FATAL:').strip()}. Point "
                f"database.postgres_url in {path} at the database DeerFlow writes its checkpoints to.")
    return ("checkpoint_database_unavailable",
            f"The checkpoint database (database.postgres_url in {path}) cannot be reached.",
            f"PostgreSQL at {where} is unreachable: {reason}. {_START}")


def _summary_tables_missing(exc: BaseException) -> tuple[str, str, str]:
    return ("summary_tables_missing",
            f"The dashboard's thread summary tables in the checkpoint database are gone ({_reason(exc)}); "
            "LangGraph's own tables are not affected.",
            "Reload: the thread list recreates and rebuilds them (or run `python manage.py refresh_inventory`).")


def _checkpoint_sqlite(exc: sqlite3.DatabaseError) -> tuple[str, str, str]:
    path, database = _checkpoint_database()
    file = database.sqlite_path() if database is not None and hasattr(database, "sqlite_path") else "deerflow.db"
    reason = _reason(exc)
    if is_summary_table_missing(exc):
        return _summary_tables_missing(exc)
    if "no such table" in reason:
        return ("checkpoint_tables_missing",
                f"The SQLite checkpoint file {file} has no LangGraph checkpoint tables ({reason}).",
                f"Point database.sqlite_dir in {path} at the directory holding DeerFlow's deerflow.db.")
    if "disk i/o" in reason.lower() or "disk is full" in reason.lower():
        return ("checkpoint_disk_io_error", f"The SQLite checkpoint file {file} failed: {reason}.", DISK_IO_HINT)
    wal = database is not None and is_wal_file(file)
    if "readonly database" in reason and not wal:
        return ("checkpoint_database_read_only",
                f"The SQLite checkpoint file {file} refused a write: {reason}.", READ_ONLY_HINT)
    if "locked" in reason or "busy" in reason:
        hint = "Another process holds a write lock on the file; retry in a moment."
    elif "readonly database" in reason:  # a WAL file: even reading needs to write its -shm beside it
        return ("checkpoint_database_read_only",
                f"The SQLite checkpoint file {file} cannot be read: {reason}.",
                f"The file is in WAL mode and this process may not write to {file.parent}: a WAL reader must "
                f"create {file.name}-shm there while no other process has the file open. Let this process's "
                "user write to that directory (DeerFlow's own user does), or browse a copy (sqlite3 "
                f"{file.name} \"VACUUM INTO 'copy.db'\" makes one in rollback-journal mode, which a "
                "read-only process can open).")
    else:
        hint = "Check that the file exists and this process may read it, then retry."
    return ("checkpoint_database_unavailable", f"The SQLite checkpoint file {file} cannot be read: {reason}.", hint)


def _dashboard_database(exc: BaseException) -> tuple[str, str, str]:
    db = settings.DATABASES["default"]
    reason = _reason(exc.__cause__ or exc)
    if "sqlite" in db["ENGINE"]:
        where, service = f"{db['NAME']}", "SQLite file"
    else:
        where, service = f"{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}", "PostgreSQL at"
    detail = "The dashboard's own database (DASHBOARD_DATABASE_URL: users, sessions, tokens, jobs) cannot be used."
    if _unmigrated(exc) or re.search(r"no such (table|column)", reason):
        return ("dashboard_database_unavailable", detail,
                f"{service} {where}: {reason}. Run `python manage.py migrate` (with the same "
                "DASHBOARD_DATABASE_URL), then retry.")
    return "dashboard_database_unavailable", detail, f"{service} {where} is unreachable: {reason}. {_START}"


def _unmigrated(exc: BaseException) -> bool:
    """True when Django's Postgres error is a missing table or column: migrations not (all) applied."""
    return isinstance(exc.__cause__, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn)


def _broker(exc: BaseException) -> tuple[str, str, str]:
    url = maybe_sanitize_url(settings.CELERY_BROKER_URL)
    service = {"redis": "Redis", "amqp": "RabbitMQ"}.get(broker_kind(url), "The broker")
    return ("broker_unavailable",
            "The Celery broker (CELERY_BROKER_URL) cannot be reached; nothing was sent to the workers.",
            f"{service} at {url} is unreachable: {_reason(exc)}. {_START} A job launched meanwhile waits paused: "
            "resume it from its page once the broker is back (a job selecting by filter is cancelled instead: "
            "launch it again).")


def describe_outage(exc: BaseException) -> tuple[str, str, str] | None:
    """``(code, detail, hint)`` for an outage error, or ``None`` when ``exc`` is not one (status is 503).

    Passwords in URLs are masked in both texts.
    """
    described = _describe(exc)
    return None if described is None else (described[0], redact(described[1]), redact(described[2]))


def _describe(exc: BaseException) -> tuple[str, str, str] | None:
    exc = driver_error(exc)  # a deerflow StorageError is described by the driver error it translates
    if isinstance(exc, db_utils.OperationalError | db_utils.InterfaceError) or (
            isinstance(exc, db_utils.ProgrammingError) and _unmigrated(exc)):
        return _dashboard_database(exc)
    if isinstance(exc, kombu.exceptions.OperationalError | redis.exceptions.ConnectionError
                  | redis.exceptions.TimeoutError):
        return _broker(exc)
    if isinstance(exc, psycopg.OperationalError | psycopg.errors.UndefinedTable
                  | psycopg.errors.InsufficientPrivilege | psycopg.errors.ReadOnlySqlTransaction):
        return _checkpoint_postgres(exc)
    if isinstance(exc, sqlite3.DatabaseError) and is_sqlite_outage(exc):
        return _checkpoint_sqlite(exc)
    return None


def is_outage(exc: BaseException) -> bool:
    """True for the errors :func:`describe_outage` describes.

    Every :data:`OUTAGES` instance is one except a Django ``ProgrammingError``
    that is not a missing table or column, and a SQLite error that is not
    :func:`is_sqlite_outage` (bugs, not outages): code that catches
    ``OUTAGES`` re-raises when this is False. A
    :class:`deerflow.errors.StorageError` is judged by its driver error.
    """
    exc = driver_error(exc)
    if isinstance(exc, sqlite3.DatabaseError):
        return is_sqlite_outage(exc)
    return isinstance(exc, OUTAGES) and (not isinstance(exc, db_utils.ProgrammingError) or _unmigrated(exc))


def describe_storage_failure(exc: BaseException) -> tuple[str, str, str] | None:
    """``(code, detail, hint)`` of the checkpoint-database failure behind ``exc``, or ``None``.

    The same words :func:`describe_outage` gives a page or the API, found anywhere in ``exc``'s chain of
    causes (a job's thread raises it from deep in a rewrite): a read-only database, a failing disk, an
    unreachable server. Errors of the dashboard's own database or of the broker are not the thread's and
    give ``None``, as does anything else.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        driver = driver_error(current)
        if isinstance(driver, sqlite3.DatabaseError | psycopg.Error) and is_outage(driver):
            return describe_outage(driver)
        current = current.__cause__ or current.__context__
    return None


_SECRET = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


def redact(text: str) -> str:
    """``text`` with any ``scheme://user:password@`` password replaced by ``***``."""
    return _SECRET.sub(r"\1***@", text)
