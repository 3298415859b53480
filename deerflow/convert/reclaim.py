"""Give the space a compaction (and a purge of its backups) freed back: SQLite ``VACUUM``, Postgres
``VACUUM (ANALYZE)``.

Rewritten rows leave free pages behind: the file (SQLite) or the tables
(Postgres) keep their size until the database reclaims them.

* SQLite ``VACUUM`` rebuilds the whole file: it holds the database's write
  lock for its whole duration (DeerFlow's writers wait) and needs free disk
  about the size of the file. Then a WAL checkpoint truncates the ``-wal`` file.
* Postgres ``VACUUM (ANALYZE)`` of LangGraph's three tables marks dead rows'
  space reusable (the files rarely shrink, new checkpoints reuse the space)
  and refreshes planner statistics; it takes no lock that blocks readers or
  writers. ``VACUUM (FULL, ANALYZE)`` (``full=True``) rewrites the tables and
  returns the space to the operating system, but holds an ACCESS EXCLUSIVE
  lock on each table while it runs: every DeerFlow read and write of the
  checkpoint database waits.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.storage.dialect import Dialect
from deerflow.storage.savers import sqlite_checkpoint_path

__all__ = ["LANGGRAPH_TABLES", "ReclaimReport", "database_sizes", "reclaim_space"]

#: LangGraph's Postgres tables (``langgraph-checkpoint-postgres``).
LANGGRAPH_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


@dataclass
class ReclaimReport:
    """What a reclaim did.

    Attributes:
        backend: ``sqlite`` or ``postgres``.
        statement: the statement run (e.g. ``VACUUM``, ``VACUUM (ANALYZE)``).
        sizes_before, sizes_after: SQLite ``{"file": bytes, "wal": bytes}``; Postgres
            ``{table: bytes}`` (``pg_total_relation_size``: heap, TOAST and indexes).
        bytes_before, bytes_after: the sums (bytes); ``bytes_freed`` their difference.
        duration_s: wall time (seconds).
    """

    backend: str
    statement: str
    sizes_before: dict[str, int] = field(default_factory=dict)
    sizes_after: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0

    @property
    def bytes_before(self) -> int:
        """Total bytes before."""
        return sum(self.sizes_before.values())

    @property
    def bytes_after(self) -> int:
        """Total bytes after."""
        return sum(self.sizes_after.values())

    @property
    def bytes_freed(self) -> int:
        """``bytes_before - bytes_after``."""
        return self.bytes_before - self.bytes_after

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy, totals included."""
        return {**asdict(self), "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                "bytes_freed": self.bytes_freed}


def _sqlite_sizes(path: Any) -> dict[str, int]:
    wal = path.with_name(path.name + "-wal")
    return {"file": path.stat().st_size, "wal": wal.stat().st_size if wal.exists() else 0}


def _postgres_sizes(conn: Any) -> dict[str, int]:
    out = {}
    for table in LANGGRAPH_TABLES:
        row = conn.execute("SELECT pg_total_relation_size(to_regclass(%s)) AS b", (table,)).fetchone()
        out[table] = int(row["b"] or 0)
    return out


def database_sizes(database: DatabaseConfig) -> dict[str, int]:
    """The sizes a reclaim reports, now, without vacuuming (bytes).

    Returns:
        SQLite ``{"file": bytes, "wal": bytes}``; Postgres ``{table: bytes}`` of :data:`LANGGRAPH_TABLES`
        (``pg_total_relation_size``).

    Raises:
        ValueError: the memory backend. FileNotFoundError: the SQLite file does not exist.
        psycopg.Error: Postgres cannot be reached.
    """
    if database.backend == "sqlite":
        path = sqlite_checkpoint_path(database)
        if not path.is_file():
            raise FileNotFoundError(f"SQLite checkpoint file {path} does not exist")
        return _sqlite_sizes(path)
    if database.backend == "postgres":
        with Dialect.POSTGRES.connect(database) as conn:
            return _postgres_sizes(conn)
    raise ValueError("reclaiming space needs a persistent backend (sqlite or postgres), not 'memory'")


def reclaim_space(database: DatabaseConfig, *, full: bool = False) -> ReclaimReport:
    """Vacuum the checkpoint database and report the sizes before and after.

    Args:
        database: the checkpoint database (sqlite or postgres).
        full: Postgres only: ``VACUUM (FULL, ANALYZE)`` (exclusive lock per table, returns space to the OS).

    Returns:
        A :class:`ReclaimReport`.

    Raises:
        ValueError: the memory backend, or ``full`` on SQLite (its ``VACUUM`` is always a full rebuild).
        FileNotFoundError: the SQLite file does not exist.
        sqlite3.OperationalError / psycopg.Error: the database refused (e.g. locked, no disk space);
            nothing was lost (VACUUM is atomic).
    """
    started = time.monotonic()
    if database.backend == "sqlite":
        if full:
            raise ValueError("full=True is for Postgres; SQLite's VACUUM always rebuilds the whole file")
        path = sqlite_checkpoint_path(database)
        if not path.is_file():
            raise FileNotFoundError(f"SQLite checkpoint file {path} does not exist")
        report = ReclaimReport("sqlite", "VACUUM", _sqlite_sizes(path))
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=60)
        try:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        report.sizes_after = _sqlite_sizes(path)
    elif database.backend == "postgres":
        statement = "VACUUM (FULL, ANALYZE)" if full else "VACUUM (ANALYZE)"
        with Dialect.POSTGRES.connect(database) as pg:
            report = ReclaimReport("postgres", statement, _postgres_sizes(pg))
            for table in LANGGRAPH_TABLES:
                pg.execute(f"{statement} {table}")  # VACUUM cannot run inside a transaction block
            report.sizes_after = _postgres_sizes(pg)
    else:
        raise ValueError("reclaiming space needs a persistent backend (sqlite or postgres), not 'memory'")
    report.duration_s = round(time.monotonic() - started, 3)
    return report
