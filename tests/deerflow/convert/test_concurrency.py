"""Concurrency: a per-thread lock, and a watermark that rolls back and retries a conversion when the
thread receives new checkpoints meanwhile.

The ``before_commit`` hook runs inside the conversion's transaction, after the
rewrite and verification, just before the watermark check and commit: the
moment a concurrent writer or a second converter would do the most harm.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base.id import uuid6

from deerflow.convert import convert_thread
from tests.deerflow.convert.support import (
    agent_graph,
    backup_ids,
    config_for,
    convert_and_compare,
    execute,
    human,
    messages_at,
    open_saver,
    raw_rows,
    readings,
    run_turn,
)

THREAD = "busy"


def _thread(db, turns: int = 4) -> None:
    with open_saver(db) as saver:
        graph = agent_graph(saver, tool_every=2)
        for t in range(turns):
            run_turn(graph, THREAD, human(t))


def _waiting_advisory_locks(db) -> int:
    with psycopg.connect(db.postgres_url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                            "WHERE l.locktype = 'advisory' AND NOT l.granted AND a.datname = current_database()"
                            ).fetchone()[0]


def test_two_concurrent_conversions_of_one_thread(scratch_db):
    _thread(scratch_db)
    truth = readings(scratch_db, THREAD, "delta")
    second: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: second.setdefault("report", convert_thread(scratch_db, THREAD)))
    observed: dict[str, Any] = {}

    def hook(session: Any) -> None:
        worker.start()
        deadline = time.monotonic() + 15
        if scratch_db.backend == "postgres":
            while time.monotonic() < deadline and not observed.get("waiting"):
                observed["waiting"] = _waiting_advisory_locks(scratch_db)
                time.sleep(0.05)
        else:
            time.sleep(1.0)
            observed["waiting"] = int(worker.is_alive())

    first = convert_thread(scratch_db, THREAD, before_commit=hook)
    worker.join(60)
    assert not worker.is_alive()
    assert observed["waiting"] == 1  # the second conversion was blocked on the lock while the first held it
    assert first.status == "converted"
    assert second["report"].status == "already_full"
    assert backup_ids(scratch_db) == [first.backup_id]
    assert readings(scratch_db, THREAD, "full") == truth


def _append_checkpoint_elsewhere(db) -> str:
    """A concurrent writer, on its own connection, commits one more checkpoint on top of the head."""
    with open_saver(db) as other:
        head = other.get_tuple(config_for(THREAD))
        checkpoint = {**head.checkpoint, "id": str(uuid6(clock_seq=99))}
        metadata = {**head.metadata, "step": head.metadata["step"] + 1, "source": "update"}
        other.put(config_for(THREAD, head.config["configurable"]["checkpoint_id"]), checkpoint, metadata, {})
        return checkpoint["id"]


@pytest.mark.postgres
def test_new_checkpoint_during_conversion_is_rolled_back_and_retried(request):
    db = request.getfixturevalue("empty_postgres_db")
    _thread(db)
    head_before = messages_at(db, THREAD, mode="delta")
    added: list[str] = []

    def hook(session: Any) -> None:
        if not added:
            added.append(_append_checkpoint_elsewhere(db))

    report = convert_thread(db, THREAD, before_commit=hook)

    assert report.status == "converted" and report.attempts == 2
    # the retry converted the newcomer too
    assert [m.id for m in messages_at(db, THREAD, added[0], mode="full")] == [m.id for m in head_before]
    assert backup_ids(db) == [report.backup_id]
    assert execute(db, "SELECT checkpoint_rows FROM dfa_backups")[0][0] == len(
        execute(db, "SELECT 1 FROM checkpoints WHERE thread_id = ?", (THREAD,)))


@pytest.mark.postgres
def test_new_checkpoint_with_a_single_attempt_changes_nothing(request):
    db = request.getfixturevalue("empty_postgres_db")
    _thread(db)
    before = raw_rows(db, THREAD)
    added: list[str] = []

    report = convert_thread(db, THREAD, max_attempts=1,
                            before_commit=lambda session: added.append(_append_checkpoint_elsewhere(db)))

    assert report.status == "changed_during_conversion" and report.attempts == 1
    assert report.error and report.hint and report.backup_id is None
    after = raw_rows(db, THREAD)
    # only the concurrent writer's own checkpoint is new; the conversion wrote nothing
    assert [r for r in after["checkpoints"] if r[1] != added[0]] == before["checkpoints"]
    assert after["blobs"] == before["blobs"] and after["writes"] == before["writes"]
    assert backup_ids(db) == []
    # and a later run converts everything
    convert_and_compare(db, THREAD)


def test_sqlite_conversion_holds_the_write_lock(tmp_path):
    """On SQLite the conversion's transaction holds the database write lock: a concurrent writer cannot
    add a checkpoint until it commits, so the watermark never moves."""
    from deerflow.config.database_config import DatabaseConfig

    db = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data"))
    _thread(db)
    refused: list[str] = []

    def hook(session: Any) -> None:
        conn = sqlite3.connect(str(db.sqlite_path()), timeout=0.3)
        try:
            conn.execute("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id) VALUES (?, '', 'x')",
                         (THREAD,))
            conn.commit()
        except sqlite3.OperationalError as exc:
            refused.append(str(exc))
        finally:
            conn.close()

    report = convert_thread(db, THREAD, before_commit=hook)
    assert refused == ["database is locked"]
    assert report.status == "converted" and report.attempts == 1


def test_an_analysis_session_reads_one_snapshot_and_blocks_no_writer(scratch_db):
    """``open_session(write=False)`` (what a dry run uses): a concurrent writer commits meanwhile, and the
    session keeps reading the snapshot it started with. A conversion session (``write=True``) on SQLite
    holds the write lock instead."""
    from deerflow.storage.sessions import open_session

    _thread(scratch_db)
    with open_session(scratch_db, write=False) as session:
        before = session.watermark(THREAD)
        added = _append_checkpoint_elsewhere(scratch_db)  # would wait for the lock if the session held it
        assert session.watermark(THREAD) == before
        if scratch_db.backend == "postgres":
            from deerflow.errors import StoragePermissionError

            with pytest.raises(StoragePermissionError) as refused:
                session.execute("DELETE FROM checkpoints WHERE thread_id = ?", [THREAD])
            assert isinstance(refused.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)
    assert added in [r[0] for r in execute(scratch_db, "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?",
                                           (THREAD,))]
    if scratch_db.backend == "sqlite":
        with open_session(scratch_db) as session:
            session.lock_thread(THREAD)
            conn = sqlite3.connect(str(scratch_db.sqlite_path()), timeout=0.2)
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                conn.execute("DELETE FROM checkpoints WHERE checkpoint_id = ?", (added,))
            conn.close()


@pytest.mark.parametrize("scratch_db", ["postgres"], indirect=True)
def test_settle_waits_for_a_transaction_holding_the_thread_lock(scratch_db):
    """The SIGKILL tests' ``settle`` returns only once a rewrite's transaction has ended."""
    from deerflow.storage.driver_errors import StorageUnavailableError, driver_error
    from deerflow.storage.sessions import open_session
    from tests.deerflow.convert.support import settle

    with open_session(scratch_db) as session:
        session.lock_thread(THREAD)
        with pytest.raises(StorageUnavailableError) as held:
            settle(scratch_db, THREAD, timeout_s=1)
        assert isinstance(driver_error(held.value), psycopg.errors.LockNotAvailable)
        settle(scratch_db, "another thread", timeout_s=1)  # another thread's lock is free
    started = time.monotonic()
    settle(scratch_db, THREAD, timeout_s=1)  # rolled back: free again
    assert time.monotonic() - started < 1
