"""The checkpoint database: how it is opened, addressed, queried and written, on SQLite and Postgres.

One package owns every difference between LangGraph's two SQL layouts and every driver:

* :mod:`~deerflow.storage.dialect` -- :class:`Dialect`, the one object asked for each difference
  (connect, placeholders, fragments, locks, stored bytes); no other module branches on a dialect's name;
* :mod:`~deerflow.storage.savers` -- open the LangGraph saver a ``database:`` block names;
* :mod:`~deerflow.storage.pool` -- the Postgres pool that answers at once while its server is down;
* :mod:`~deerflow.storage.sqlread` -- :class:`SqlReader` and :class:`Tx`: SQL on a saver's own connection;
* :mod:`~deerflow.storage.sessions` -- :class:`ConversionSession`: one connection, one transaction and a
  saver bound to it, for every rewrite of a thread;
* :mod:`~deerflow.storage.driver_errors` -- ``sqlite3`` / ``psycopg`` errors translated into
  :class:`deerflow.errors.StorageError` subclasses;
* :mod:`~deerflow.storage.addressing` -- the ``RunnableConfig`` that addresses one checkpoint;
* :mod:`~deerflow.storage.reservation` -- DeerFlow's durable ``checkpoint_write`` reservation in its
  ``runs`` table, taken around every rewrite of a thread when the database has DeerFlow's tables.

Laws:

* a driver error never leaves this package untranslated: every query and transaction runs inside
  :func:`translated`, so callers see ``StorageError`` with the driver's error as ``__cause__``;
* the same query text runs on both dialects (``?`` placeholders; :meth:`Dialect.sql` converts);
* nothing here decides what a checkpoint *means* (modes, classes, gates): that is
  :mod:`deerflow.runtime`, :mod:`deerflow.inventory` and :mod:`deerflow.reader`.

Importing the package does not import LangGraph: its savers are imported where a backend is opened,
so a process that only reports a config.yaml error never pays for them.
"""

from deerflow.storage.addressing import config_for
from deerflow.storage.dialect import Dialect, postgres_connect_kwargs
from deerflow.storage.driver_errors import driver_error, is_sqlite_outage, storage_error, translated
from deerflow.storage.pool import FailFastConnectionPool, ServerUnreachable
from deerflow.storage.reservation import (
    ActiveRun,
    Reservation,
    RunInFlightError,
    owner_id,
    release_expired,
    reserve_checkpoint_write,
)
from deerflow.storage.savers import (
    SQLITE_SAVER_TABLES,
    is_wal_file,
    open_async_checkpointer,
    open_checkpointer,
    sqlite_checkpoint_path,
)
from deerflow.storage.sessions import ConversionSession, open_session
from deerflow.storage.sqlread import (
    SqlReader,
    Tx,
    checkpoint_time,
    has_sql_tables,
    postgres_connection,
    reader_for,
    table_exists,
)

__all__ = [
    "ActiveRun",
    "ConversionSession",
    "Dialect",
    "FailFastConnectionPool",
    "Reservation",
    "RunInFlightError",
    "SQLITE_SAVER_TABLES",
    "ServerUnreachable",
    "SqlReader",
    "Tx",
    "checkpoint_time",
    "config_for",
    "driver_error",
    "has_sql_tables",
    "is_sqlite_outage",
    "is_wal_file",
    "open_async_checkpointer",
    "open_checkpointer",
    "open_session",
    "owner_id",
    "postgres_connect_kwargs",
    "postgres_connection",
    "reader_for",
    "release_expired",
    "reserve_checkpoint_write",
    "sqlite_checkpoint_path",
    "storage_error",
    "table_exists",
    "translated",
]
