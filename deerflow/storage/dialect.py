"""The SQL dialect of a checkpoint database: chosen once, asked for every difference.

:class:`Dialect` is a :class:`~enum.StrEnum` (``"sqlite"`` / ``"postgres"``,
so a dialect still compares equal to its name) that owns everything the two
LangGraph layouts do differently, so no module branches on the string:

* **choice** -- :meth:`Dialect.of_database` (a ``database:`` block),
  :meth:`Dialect.of_connection`, :meth:`Dialect.of_saver`;
* **connect** -- :meth:`Dialect.connect` (the one place a ``sqlite3`` or
  ``psycopg`` connection to the checkpoint database is opened) and
  :func:`postgres_connect_kwargs` (the settings LangGraph's savers need);
* **placeholders and rows** -- :meth:`Dialect.sql` (``?`` everywhere),
  :meth:`Dialect.rows`;
* **table names** -- :attr:`Dialect.writes_table`, :attr:`Dialect.write_value_column`,
  :attr:`Dialect.write_columns`, :attr:`Dialect.saver_tables`, :attr:`Dialect.has_blob_table`;
* **stored documents and loading** -- :attr:`Dialect.json_columns`, :meth:`Dialect.json_param`,
  :attr:`Dialect.bulk_copy`, :attr:`Dialect.pipelines`;
* **locks** -- :meth:`Dialect.lock_thread` (``pg_advisory_xact_lock``; SQLite's
  ``BEGIN IMMEDIATE`` already holds the database write lock), :meth:`Dialect.begin`;
* **DDL** -- :attr:`Dialect.bigint`, :attr:`Dialect.smallint`,
  :attr:`Dialect.concurrently`, :attr:`Dialect.add_column_if_not_exists`;
* **fragments** -- the delta evidence (:meth:`Dialect.delta_evidence`, generated from
  :mod:`deerflow.runtime.delta_evidence`, and its two clauses), the
  step, substring search, stored bytes (:meth:`Dialect.checkpoint_bytes`,
  :meth:`Dialect.write_bytes`), :meth:`Dialect.table_exists_sql`.

Layouts (LangGraph's, never altered): Postgres ``checkpoints`` (JSONB
``checkpoint``/``metadata``), ``checkpoint_blobs``, ``checkpoint_writes``
(value column ``blob``); SQLite ``checkpoints`` (msgpack ``checkpoint`` BLOB,
JSON ``metadata`` BLOB) and ``writes`` (value column ``value``), with every
channel value inside the checkpoint blob.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.errors import ConfigError
from deerflow.runtime.delta_evidence import BOOKKEEPING, COUNTERS_METADATA_KEY, DELTA_EVIDENCE, MARKER, Clause

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["Dialect", "postgres_connect_kwargs"]

#: The tables ``SqliteSaver.setup()`` creates (LangGraph's SQLite schema).
_SQLITE_TABLES = ("checkpoints", "writes")
#: The tables ``PostgresSaver.setup()`` creates besides its migrations table.
_POSTGRES_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def postgres_connect_kwargs(database: DatabaseConfig) -> dict[str, Any]:
    """psycopg connection kwargs LangGraph's Postgres savers require (and the schema's search_path).

    Returns:
        ``{"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}``
        plus ``options`` setting ``search_path`` when ``postgres_schema`` is set.
    """
    from psycopg.rows import dict_row

    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if database.postgres_schema:
        kwargs["options"] = f"-c search_path={database.postgres_schema}"
    return kwargs


class Dialect(StrEnum):
    """One of LangGraph's two SQL layouts, with the SQL that differs between them."""

    SQLITE = "sqlite"
    POSTGRES = "postgres"

    # -- choice ---------------------------------------------------------------------
    @classmethod
    def of_database(cls, database: DatabaseConfig, *, purpose: str = "this") -> Dialect:
        """The dialect of a ``database:`` block.

        Args:
            database: the ``database:`` block.
            purpose: what needs SQL tables, for the message (e.g. ``"conversion"``).

        Raises:
            ConfigError: ``backend: memory`` keeps no SQL tables (also a ``ValueError``).
        """
        if database.backend == "memory":
            raise ConfigError(f"{purpose} needs a persistent backend (sqlite or postgres), not 'memory'",
                              key="database.backend")
        return cls(database.backend)

    @classmethod
    def of_connection(cls, conn: Any) -> Dialect:
        """The dialect of a connection or pool, decided by its type (never by the attributes it happens to have).

        Args:
            conn: a ``sqlite3.Connection``, a psycopg connection (sync or async)
                or a ``psycopg_pool`` pool (any subclass of its ``BasePool``).

        Raises:
            TypeError: ``conn`` is none of those.
        """
        if isinstance(conn, sqlite3.Connection):
            return cls.SQLITE
        import psycopg
        from psycopg_pool.base import BasePool

        if isinstance(conn, psycopg.BaseConnection | BasePool):
            return cls.POSTGRES
        raise TypeError(f"not a sqlite3 or psycopg connection, nor a psycopg_pool pool: {type(conn).__name__}")

    @classmethod
    def of_saver(cls, saver: BaseCheckpointSaver[Any]) -> Dialect | None:
        """The dialect of a LangGraph saver's tables (its ``conn``), or ``None`` for a saver without SQL tables.

        Raises:
            TypeError: the saver's ``conn`` is not a connection or pool (see :meth:`of_connection`).
        """
        conn = getattr(saver, "conn", None)
        if conn is None:
            return None  # InMemorySaver keeps no SQL tables
        return cls.of_connection(conn)

    # -- connect --------------------------------------------------------------------
    def connect(self, database: DatabaseConfig, *, autocommit: bool = True, timeout: float = 30.0,
                **options: Any) -> Any:
        """A new connection to the checkpoint database of ``database`` (the caller closes it).

        Args:
            database: the ``database:`` block (its backend must be this dialect).
            autocommit: SQLite: ``isolation_level=None`` (no implicit
                transactions) when true, Python's default otherwise; Postgres:
                the connection's ``autocommit``.
            timeout: SQLite: seconds to wait for a lock; Postgres: ignored
                (pass ``connect_timeout`` in ``options``).
            options: extra keyword arguments for ``sqlite3.connect`` (e.g.
                ``factory``) or ``psycopg.connect`` (e.g. ``connect_timeout``).

        Returns:
            A ``sqlite3.Connection`` (``check_same_thread=False``) or a
            ``psycopg.Connection`` with :func:`postgres_connect_kwargs`.

        Raises:
            sqlite3.Error / psycopg.Error: the driver could not connect.
        """
        if self is Dialect.SQLITE:
            kwargs: dict[str, Any] = {"timeout": timeout, "check_same_thread": False}
            if autocommit:
                kwargs["isolation_level"] = None
            kwargs.update(options)
            return sqlite3.connect(str(database.sqlite_path()), **kwargs)
        import psycopg

        kwargs = postgres_connect_kwargs(database)
        kwargs["autocommit"] = autocommit
        kwargs.update(options)
        return psycopg.connect(database.postgres_url or "", **kwargs)

    # -- placeholders and rows ------------------------------------------------------
    def sql(self, sql: str) -> str:
        """``sql`` written with ``?`` placeholders, in this dialect's paramstyle (Postgres: ``%s``, ``%`` doubled)."""
        return sql if self is Dialect.SQLITE else sql.replace("%", "%%").replace("?", "%s")

    def rows(self, cursor: Any) -> list[dict[str, Any]]:
        """Every remaining row of ``cursor`` as a dict keyed by column name."""
        if self is Dialect.SQLITE:
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return [dict(r) for r in cursor.fetchall()]

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``(condition, params)``: ``column`` is one of ``values`` (Postgres ``= ANY(?)``, SQLite ``IN (?, ...)``)."""
        if self is Dialect.POSTGRES:
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({', '.join('?' for _ in values)})", list(values)

    # -- table names ----------------------------------------------------------------
    @property
    def writes_table(self) -> str:
        """LangGraph's pending-writes table: ``writes`` (SQLite) or ``checkpoint_writes`` (Postgres)."""
        return "writes" if self is Dialect.SQLITE else "checkpoint_writes"

    @property
    def write_value_column(self) -> str:
        """The serialized value column of the writes table: ``value`` (SQLite) or ``blob`` (Postgres)."""
        return "value" if self is Dialect.SQLITE else "blob"

    @property
    def write_columns(self) -> str:
        """The writes table's columns in the order LangGraph's schema declares them, comma-separated."""
        if self is Dialect.SQLITE:
            return "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path"
        return "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob"

    @property
    def has_blob_table(self) -> bool:
        """True when channel values live in ``checkpoint_blobs`` (Postgres), not in the checkpoint (SQLite)."""
        return self is Dialect.POSTGRES

    @property
    def saver_tables(self) -> tuple[str, ...]:
        """The tables LangGraph's saver of this dialect keeps a thread in."""
        return _SQLITE_TABLES if self is Dialect.SQLITE else _POSTGRES_TABLES

    @property
    def table_privileges(self) -> bool:
        """True when roles hold per-table privileges (Postgres ``GRANT``); SQLite has none (file permissions only)."""
        return self is Dialect.POSTGRES

    def table_exists_sql(self) -> str:
        """``SELECT ... AS x`` true when the table named by the one ``?`` parameter exists (Postgres: on the
        search path)."""
        if self is Dialect.SQLITE:
            return "SELECT COUNT(*) AS x FROM sqlite_master WHERE type = 'table' AND name = ?"
        return "SELECT to_regclass(?) IS NOT NULL AS x"

    # -- stored documents and loading ----------------------------------------------
    @property
    def json_columns(self) -> bool:
        """True when ``checkpoint`` and ``metadata`` are JSONB documents (Postgres: the driver returns them
        parsed, or JSON text from ``COPY``/casts); False when they are bytes (SQLite: msgpack checkpoint,
        JSON metadata)."""
        return self is Dialect.POSTGRES

    def json_param(self, value: Any) -> Any:
        """``value`` bound for a ``checkpoint``/``metadata`` column: wrapped in psycopg's ``Jsonb`` on
        Postgres, as is on SQLite (the stored bytes)."""
        if self is Dialect.SQLITE:
            return value
        from psycopg.types.json import Jsonb

        return Jsonb(value)

    @property
    def bulk_copy(self) -> bool:
        """True when rows are bulk-loaded with ``COPY ... (FORMAT BINARY)`` (Postgres); SQLite: ``executemany``."""
        return self is Dialect.POSTGRES

    @property
    def pipelines(self) -> bool:
        """True when the driver can queue statements without waiting for each result (psycopg pipeline mode)."""
        return self is Dialect.POSTGRES

    # -- transactions and locks -----------------------------------------------------
    def begin(self, conn: Any, *, write: bool) -> None:
        """Open a transaction on an autocommit ``conn``.

        SQLite: ``BEGIN IMMEDIATE`` (the database write lock, for the whole
        transaction) when ``write``, else a deferred ``BEGIN``. Postgres
        connections opened with ``autocommit=False`` begin on their first
        statement; this sets ``REPEATABLE READ``, read only, when not ``write``.
        """
        if self is Dialect.SQLITE:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            return
        if not write:
            import psycopg

            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True

    def lock_thread(self, conn: Any, key: str) -> None:
        """Serialize writers of one thread inside the open transaction.

        Postgres: ``pg_advisory_xact_lock`` on ``key`` (released at commit or
        rollback). SQLite: nothing to do, ``BEGIN IMMEDIATE`` holds the
        database write lock already.
        """
        if self is Dialect.POSTGRES:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))

    def try_lock_sql(self) -> str | None:
        """SQL taking a transaction-scoped lock on the ``?`` key without waiting (``AS ok``), or ``None``
        (SQLite: held)."""
        if self is Dialect.SQLITE:
            return None
        return "SELECT pg_try_advisory_xact_lock(hashtext(?)) AS ok"

    # -- DDL ------------------------------------------------------------------------
    @property
    def bigint(self) -> str:
        """A 64-bit integer column type."""
        return "INTEGER" if self is Dialect.SQLITE else "BIGINT"

    @property
    def smallint(self) -> str:
        """A small integer (flag) column type."""
        return "INTEGER" if self is Dialect.SQLITE else "SMALLINT"

    @property
    def concurrently(self) -> str:
        """``"CONCURRENTLY "`` for ``CREATE INDEX`` on Postgres (needs autocommit), ``""`` on SQLite."""
        return "" if self is Dialect.SQLITE else "CONCURRENTLY "

    @property
    def add_column_if_not_exists(self) -> str:
        """``"IF NOT EXISTS "`` for ``ALTER TABLE ... ADD COLUMN`` on Postgres; SQLite has no such clause."""
        return "" if self is Dialect.SQLITE else "IF NOT EXISTS "

    def timestamp_text(self, column: str) -> str:
        """``column`` (SQLite: ISO text already; Postgres: ``TIMESTAMPTZ``) as ISO-8601 UTC text, microseconds."""
        if self is Dialect.SQLITE:
            return column
        return f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')"

    # -- fragments over a checkpoints row aliased ``alias`` -------------------------
    def clause(self, clause: Clause, alias: str = "c") -> str:
        """SQL for :meth:`deerflow.runtime.delta_evidence.Clause.holds` on the row: true or false, never NULL.

        Generated from the clause (its path and expected string), so Python and SQL read one
        definition. A value at the path: SQLite ``json_type`` (``'null'`` for a JSON null, NULL
        when absent or under a non-object), Postgres ``->`` (NULL when absent or under a
        non-object). An expected string: only a JSON string equal to it (``->>`` / ``json_extract``
        give a number, list or object as other text or a number, never the bare string).
        """
        if self is Dialect.SQLITE:
            document, path = f"CAST({alias}.metadata AS TEXT)", "$." + ".".join(clause.path)
            if clause.equals is None:
                return f"(json_type({document}, '{path}') IS NOT NULL)"
            return f"COALESCE(json_extract({document}, '{path}') = '{clause.equals}', 0)"
        *parents, last = clause.path
        parent = f"{alias}.metadata" + "".join(f"->'{key}'" for key in parents)
        if clause.equals is None:
            return f"(({parent}->'{last}') IS NOT NULL)"
        return f"COALESCE({parent}->>'{last}' = '{clause.equals}', false)"

    def delta_evidence(self, alias: str = "c") -> str:
        """True when the row's metadata shows delta mode: the SQL twin of
        :func:`deerflow.runtime.delta_evidence.shows_delta` (any clause of its ``DELTA_EVIDENCE``)."""
        return "(" + " OR ".join(self.clause(c, alias) for c in DELTA_EVIDENCE) + ")"

    def marker(self, alias: str = "c") -> str:
        """True when the row carries the DeerFlow delta marker (the ``marker`` clause of the evidence)."""
        return self.clause(MARKER, alias)

    def counters(self, alias: str = "c") -> str:
        """True when the row carries LangGraph's delta bookkeeping without needing the DeerFlow marker: its
        ``messages`` counters or LangGraph.js's ``delta_writes_versioned`` (the evidence's ``BOOKKEEPING`` clauses)."""
        return "(" + " OR ".join(self.clause(c, alias) for c in BOOKKEEPING) + ")"

    def counter(self, alias: str = "c", index: int = 0) -> str:
        """``counters_since_delta_snapshot.messages[index]`` as an integer (0: updates, 1: supersteps), or NULL."""
        if self is Dialect.SQLITE:
            return (f"CAST(json_extract(CAST({alias}.metadata AS TEXT), "
                    f"'$.{COUNTERS_METADATA_KEY}.messages[{index}]') AS INTEGER)")
        return f"(({alias}.metadata->'{COUNTERS_METADATA_KEY}'->'messages'->>{index})::bigint)"

    def source(self, alias: str = "c") -> str:
        """The metadata ``source`` (LangGraph's ``input`` / ``loop`` / ``update`` / ``fork``) as text, or NULL."""
        if self is Dialect.SQLITE:
            return f"json_extract(CAST({alias}.metadata AS TEXT), '$.source')"
        return f"({alias}.metadata->>'source')"

    def step(self, alias: str = "c") -> str:
        """The metadata ``step`` as an integer, or NULL."""
        if self is Dialect.SQLITE:
            return f"CAST(json_extract(CAST({alias}.metadata AS TEXT), '$.step') AS INTEGER)"
        return (f"(CASE WHEN jsonb_typeof({alias}.metadata->'step') = 'number' "
                f"THEN ({alias}.metadata->>'step')::bigint END)")

    def contains(self, column: str) -> str:
        """``column`` contains the next ``?`` parameter as a literal substring, ignoring case.

        Both sides go through the database's ``lower()`` (SQLite: ASCII letters
        only; Postgres: the database's locale), so ``%`` and ``_`` are plain
        characters, unlike ``LIKE``.
        """
        if self is Dialect.SQLITE:
            return f"instr(lower({column}), lower(?)) > 0"
        return f"strpos(lower({column}), lower(?)) > 0"

    @staticmethod
    def truthy(expr: str) -> str:
        """``expr`` as an integer 0/1, portable across both dialects."""
        return f"(CASE WHEN {expr} THEN 1 ELSE 0 END)"

    # -- stored sizes (bytes): one definition for the inventory, summary, census and conversion --
    def checkpoint_bytes(self, alias: str | None = "c") -> str:
        """Stored bytes of one ``checkpoints`` row (checkpoint + metadata; Postgres: on-disk, compressed).

        ``alias=None`` names the columns unqualified. NULL columns count 0.
        """
        a = f"{alias}." if alias else ""
        if self is Dialect.SQLITE:
            return f"(COALESCE(LENGTH({a}checkpoint), 0) + COALESCE(LENGTH({a}metadata), 0))"
        return f"(pg_column_size({a}checkpoint) + pg_column_size({a}metadata))"

    def write_bytes(self, alias: str | None = "w") -> str:
        """Bytes of one pending-write row's serialized value (``alias=None``: unqualified)."""
        a = f"{alias}." if alias else ""
        return f"COALESCE(LENGTH({a}{self.write_value_column}), 0)"

    @staticmethod
    def blob_bytes(alias: str | None = None) -> str:
        """Bytes of one ``checkpoint_blobs`` row's value (Postgres only; ``alias=None``: unqualified)."""
        a = f"{alias}." if alias else ""
        return f"COALESCE(LENGTH({a}blob), 0)"
