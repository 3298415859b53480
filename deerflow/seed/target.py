"""The database a seed writes into: checked before anything runs, analyzed after the load.

:func:`check_target` fails in a few seconds at most, before any template is
recorded, on what would otherwise hang in a connection pool or be created by
mistake. The seeder is a generator, so it creates what a new database lacks
-- LangGraph's tables (``setup()``), the SQLite file and its ``sqlite_dir`` --
but not what a typo names: a ``sqlite_dir`` whose parent directory does not
exist, or a ``postgres_schema`` that does not exist.

:func:`analyze` gives the planner statistics for tables a bulk load just
filled. ``COPY`` leaves none, and autovacuum may be off or not have run yet:
without them Postgres plans the thread list's freshness count
(``checkpoint_id > <watermark>``) as a sequential scan of ``checkpoints``
on every list request instead of an index range scan.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from deerflow.config.database_config import DatabaseConfig
from deerflow.errors import ConfigError
from deerflow.storage.dialect import Dialect
from deerflow.storage.savers import sqlite_checkpoint_path
from deerflow.storage.sqlread import Tx, table_exists

__all__ = ["CONNECT_TIMEOUT_S", "SUMMARY_TABLES", "SeedTargetError", "analyze", "check_target", "loaded_tables"]

#: Seconds :func:`check_target` waits for a Postgres server.
CONNECT_TIMEOUT_S = 3
#: The thread summary's tables a seed (or the summary build after it) fills (:mod:`deerflow.inventory.summary`).
SUMMARY_TABLES = ("dfa_thread_summary", "dfa_thread_cadences", "dfa_thread_writes", "dfa_thread_write_snapshots")
#: Rows per index SQLite's ANALYZE samples (``PRAGMA analysis_limit``): its cost stays flat with table size.
_SQLITE_ANALYSIS_LIMIT = 1000


class SeedTargetError(ConfigError):
    """config.yaml's ``database:`` block names a target the seeder will not create (a typo, most likely).

    Raised by :func:`check_target` before anything is written. ``str(error)``
    is ``"<problem>. <remedy>"``.

    Attributes:
        key: the config.yaml key at fault (``database.sqlite_dir`` or ``database.postgres_schema``).
        problem: what is wrong, one sentence without the final period.
        remedy: what to do, one or more sentences.
    """

    def __init__(self, problem: str, remedy: str, *, key: str):
        super().__init__(f"{problem}. {remedy}", key=key)
        self.problem = problem
        self.remedy = remedy


def check_target(database: DatabaseConfig) -> None:
    """Fail fast when ``database`` cannot receive a seed; writes nothing.

    SQLite: ``sqlite_dir`` must be a directory, or not exist inside a
    directory that does (the seeder creates it and ``deerflow.db``).
    Postgres: one direct connection (:data:`CONNECT_TIMEOUT_S` at most, the
    configured ``search_path``) must succeed and find a schema to create the
    tables in.

    Raises:
        ValueError: the backend is ``memory`` (nothing would persist).
        SeedTargetError: ``sqlite_dir``'s parent directory does not exist, ``sqlite_dir`` is not a
            directory, or ``postgres_schema`` (or, without it, every schema on the search path)
            does not exist.
        psycopg.OperationalError: the server is unreachable or the database does not exist
            (libpq's message says which).
    """
    if database.backend == "sqlite":
        _check_sqlite_dir(database)
    elif database.backend == "postgres":
        _check_postgres(database)
    else:
        raise ValueError("seeding needs a persistent backend (sqlite or postgres)")


def _check_sqlite_dir(database: DatabaseConfig) -> None:
    directory = sqlite_checkpoint_path(database).parent.absolute()
    if directory.is_dir():
        return
    shown = repr(database.sqlite_dir) + ("" if Path(database.sqlite_dir).is_absolute() else f" ({directory})")
    if directory.exists():
        raise SeedTargetError(f"database.sqlite_dir {shown} is not a directory",
                              "Point database.sqlite_dir at a directory (the seeder writes deerflow.db in it).",
                              key="database.sqlite_dir")
    if not directory.parent.is_dir():
        raise SeedTargetError(
            f"the parent directory {directory.parent} of database.sqlite_dir {shown} does not exist",
            f"Fix database.sqlite_dir (a typo?), or create {directory.parent} first: the seeder creates "
            "sqlite_dir and its deerflow.db, not missing parent directories.",
            key="database.sqlite_dir")


def _check_postgres(database: DatabaseConfig) -> None:
    with Dialect.POSTGRES.connect(database, connect_timeout=CONNECT_TIMEOUT_S) as conn:
        row = conn.execute("SELECT current_schema() AS s, current_setting('search_path') AS p").fetchone()
        where = f"database {conn.info.dbname} on {conn.info.host}:{conn.info.port}"
    if row["s"] is not None:
        return
    if database.postgres_schema:
        raise SeedTargetError(
            f"database.postgres_schema names schema {database.postgres_schema!r}, which does not exist in {where}",
            f"Create it (CREATE SCHEMA {database.postgres_schema};) or fix database.postgres_schema (without it, "
            "the tables go to the public schema): the seeder creates LangGraph's tables, not their schema.",
            key="database.postgres_schema")
    raise SeedTargetError(
        f"no schema on the search path ({row['p']}) exists in {where}",
        "Set database.postgres_schema to an existing schema, or create one on the role's search path.",
        key="database.postgres_schema")


def loaded_tables(dialect: str, *, summary: bool) -> tuple[str, ...]:
    """The tables a seed fills: LangGraph's (per ``dialect``), and the summary's when ``summary``."""
    return Dialect(dialect).saver_tables + (SUMMARY_TABLES if summary else ())


def analyze(database: DatabaseConfig, tables: tuple[str, ...]) -> float:
    """``ANALYZE`` each of ``tables`` that exists in ``database``; returns the seconds it took.

    Postgres: a table this role does not own is skipped with the server's
    warning (not an error). SQLite: each index is sampled
    (``PRAGMA analysis_limit``), a few milliseconds whatever the size.

    Raises:
        psycopg.Error / sqlite3.Error: the database cannot be reached.
    """
    started = time.monotonic()
    dialect = Dialect.of_database(database, purpose="ANALYZE")
    if dialect is Dialect.SQLITE:
        with contextlib.closing(dialect.connect(database, autocommit=False, timeout=60)) as conn:
            # As the seed's writer: closing the file otherwise fsyncs everything the load left unsynced.
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute(f"PRAGMA analysis_limit = {_SQLITE_ANALYSIS_LIMIT}")
            _analyze_present(Tx(dialect, conn), tables)
            conn.commit()
    else:
        with dialect.connect(database) as conn:
            _analyze_present(Tx(dialect, conn), tables)
    return time.monotonic() - started


def _analyze_present(tx: Tx, tables: tuple[str, ...]) -> None:
    for table in tables:
        if table_exists(tx, table):
            tx.execute(f'ANALYZE "{table}"')
