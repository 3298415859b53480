"""Give the space a prune freed back to the file system: SQLite ``VACUUM``, Postgres ``VACUUM (ANALYZE)``."""

from __future__ import annotations

import sqlite3

from deerflow.config.database_config import DatabaseConfig
from deerflow.savers import postgres_connect_kwargs, sqlite_checkpoint_path

__all__ = ["database_file_bytes", "reclaim"]

_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def database_file_bytes(database: DatabaseConfig) -> int:
    """Bytes the checkpoint store occupies on disk.

    SQLite: the file plus its ``-wal`` file. Postgres: ``pg_total_relation_size``
    of LangGraph's three tables (with their indexes and TOAST).

    Raises:
        ValueError: the memory backend.
    """
    if database.backend == "sqlite":
        path = sqlite_checkpoint_path(database)
        wal = path.with_name(path.name + "-wal")
        return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    if database.backend == "postgres":
        import psycopg

        with psycopg.connect(database.postgres_url, **{**postgres_connect_kwargs(database), "autocommit": True}) as conn:
            row = conn.execute("SELECT " + " + ".join(
                f"COALESCE(pg_total_relation_size(to_regclass('{t}')), 0)" for t in _TABLES) + " AS b").fetchone()
            return int(row["b"])
    raise ValueError("reclaim needs a persistent backend (sqlite or postgres), not 'memory'")


def reclaim(database: DatabaseConfig) -> tuple[int, int]:
    """Run the database's reclaim and return ``(file_bytes_before, file_bytes_after)``.

    SQLite: ``VACUUM`` (rewrites the file; needs free disk about the file's
    size and the write lock for its duration), after a WAL checkpoint.
    Postgres: ``VACUUM (ANALYZE)`` of LangGraph's tables (marks freed pages
    reusable and refreshes the planner's statistics; the files shrink only
    when trailing pages are empty -- ``VACUUM FULL`` is not run, it locks the
    tables).

    Raises:
        ValueError: the memory backend.
    """
    before = database_file_bytes(database)
    if database.backend == "sqlite":
        conn = sqlite3.connect(str(sqlite_checkpoint_path(database)), isolation_level=None, timeout=60)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    else:
        import psycopg

        with psycopg.connect(database.postgres_url, **{**postgres_connect_kwargs(database), "autocommit": True}) as conn:
            for table in _TABLES:
                if conn.execute("SELECT to_regclass(%s) IS NOT NULL AS x", (table,)).fetchone()["x"]:
                    conn.execute(f"VACUUM (ANALYZE) {table}")
    return before, database_file_bytes(database)
