"""Reclaim: after a compaction and a purge of its backup, VACUUM gives the freed bytes back (sizes recorded)."""

from __future__ import annotations

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import purge_backup
from deerflow.convert.compactor import compact_thread
from deerflow.convert.reclaim import LANGGRAPH_TABLES, database_sizes, reclaim_space


def _compact_and_purge(db) -> None:
    for thread_id in ("full-tools-30t", "full-compaction"):
        report = compact_thread(db, thread_id, snapshot_frequency=10)
        assert report.status == "compacted", report.error
        purge_backup(db, report.backup_id)


def test_sqlite_vacuum_shrinks_the_file(sqlite_fixture_db_rw):
    db = sqlite_fixture_db_rw
    _compact_and_purge(db)
    before = database_sizes(db)
    report = reclaim_space(db)
    assert report.statement == "VACUUM" and report.sizes_before == before and set(before) == {"file", "wal"}
    assert report.bytes_after < report.bytes_before and report.bytes_freed > 3_000_000  # full-tools-30t is 3.7 MB
    assert report.sizes_after["wal"] == 0 and database_sizes(db) == report.sizes_after
    assert report.as_dict()["bytes_freed"] == report.bytes_freed


@pytest.mark.postgres
def test_postgres_vacuum_analyze_then_full(postgres_fixture_db_rw):
    db = postgres_fixture_db_rw
    _compact_and_purge(db)
    before = database_sizes(db)
    plain = reclaim_space(db)
    assert plain.sizes_before == before
    assert plain.statement == "VACUUM (ANALYZE)" and set(plain.sizes_before) == set(LANGGRAPH_TABLES)
    # plain VACUUM marks the space reusable; the files keep (about) their size, free-space maps may add a page
    assert abs(plain.bytes_after - plain.bytes_before) < 0.01 * plain.bytes_before and plain.bytes_before > 10_000_000
    full = reclaim_space(db, full=True)
    assert full.statement == "VACUUM (FULL, ANALYZE)" and full.bytes_after < full.bytes_before - 1_000_000


def test_bad_requests_are_refused(sqlite_fixture_db_rw, tmp_path):
    with pytest.raises(ValueError, match="for Postgres"):
        reclaim_space(sqlite_fixture_db_rw, full=True)
    with pytest.raises(ValueError, match="persistent backend"):
        reclaim_space(DatabaseConfig(backend="memory"))
    with pytest.raises(FileNotFoundError):
        reclaim_space(DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "none")))
    with pytest.raises(FileNotFoundError):
        database_sizes(DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "none")))
    with pytest.raises(ValueError, match="persistent backend"):
        database_sizes(DatabaseConfig(backend="memory"))
