"""DeerFlow's ``checkpoint_write`` reservation (:mod:`deerflow.storage.reservation`) on both backends, against
DeerFlow's own ``runs`` table and its partial unique index ``uq_runs_thread_active``."""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from pathlib import Path

import psycopg
import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.storage import reservation as rsv
from tests.backends import BACKENDS, fresh_database
from tests.deerflow_schema import create_deerflow_tables, deerflow_connection, insert_run

DUPLICATE = (sqlite3.IntegrityError, psycopg.errors.UniqueViolation)


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path):
    with fresh_database(request.param, tmp_path, prefix="dfa_reserve") as db:
        create_deerflow_tables(db)
        yield db


def _rows(database: DatabaseConfig) -> list[tuple]:
    with deerflow_connection(database) as conn:
        cur = conn.execute("SELECT run_id, thread_id, status, operation_kind, owner_worker_id, multitask_strategy "
                           "FROM runs ORDER BY created_at")
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cur.fetchall()]


def test_it_holds_a_pending_checkpoint_write_row_and_deletes_it_after(database: DatabaseConfig):
    owner = rsv.owner_id("celery@w1")
    with rsv.reserve_checkpoint_write(database, "t1", owner=owner, metadata={"job_id": 7}) as held:
        assert held is not None
        assert _rows(database) == [(held.run_id, "t1", "pending", "checkpoint_write", owner, "reject")]
        # DeerFlow admits no run on the thread while it is held: the index refuses the insert (its 409)
        with pytest.raises(DUPLICATE):
            insert_run(database, "t1", status="pending")
        insert_run(database, "t2", status="running")  # another thread is not held
    assert [r[1] for r in _rows(database)] == ["t2"]


def test_it_deletes_the_row_when_the_block_raises(database: DatabaseConfig):
    with pytest.raises(RuntimeError), rsv.reserve_checkpoint_write(database, "t1"):
        raise RuntimeError("the rewrite failed")
    assert _rows(database) == []


@pytest.mark.parametrize("status", ["pending", "running"])
def test_an_active_deerflow_run_refuses_the_reservation_with_its_id(database: DatabaseConfig, status: str):
    started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=90)
    run_id = insert_run(database, "t1", status=status, created_at=started)
    with pytest.raises(rsv.RunInFlightError) as caught, rsv.reserve_checkpoint_write(database, "t1"):
        pytest.fail("the block must not run")
    assert caught.value.run is not None
    assert caught.value.run.run_id == run_id and caught.value.run.status == status
    assert 89 <= caught.value.run.age_s < 200
    assert run_id in str(caught.value)
    assert len(_rows(database)) == 1


def test_finished_runs_do_not_block(database: DatabaseConfig):
    for status in ("success", "error", "timeout", "interrupted"):
        insert_run(database, "t1", status=status)
    with rsv.reserve_checkpoint_write(database, "t1") as held:
        assert held is not None


def test_the_lease_is_renewed_while_held(database: DatabaseConfig):
    with rsv.reserve_checkpoint_write(database, "t1", lease_s=0.3) as held:
        assert held is not None
        time.sleep(0.7)
        assert held.renewals >= 2
        assert rsv.release_expired(database) == []  # renewed: not expired
        [row] = rsv.held_reservations(database)
        assert row.lease_expires_at is not None and row.lease_expires_at > dt.datetime.now(dt.UTC)


def test_release_expired_deletes_only_this_dashboards_expired_rows(database: DatabaseConfig):
    past = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    future = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    ours_dead = insert_run(database, "t1", status="pending", operation_kind="checkpoint_write",
                           owner_worker_id=rsv.owner_id("celery@gone", pid=1), lease_expires_at=past)
    ours_live = insert_run(database, "t2", status="pending", operation_kind="checkpoint_write",
                           owner_worker_id=rsv.owner_id("celery@live", pid=2), lease_expires_at=future)
    theirs = insert_run(database, "t3", status="pending", operation_kind="checkpoint_write",
                        owner_worker_id="gateway-1:0123abcd", lease_expires_at=past)
    their_run = insert_run(database, "t4", status="running", owner_worker_id="gateway-1:0123abcd",
                           lease_expires_at=past)
    assert rsv.release_expired(database) == [ours_dead]
    assert sorted(r[0] for r in _rows(database)) == sorted([ours_live, theirs, their_run])
    # once free, the thread can be reserved again
    with rsv.reserve_checkpoint_write(database, "t1") as held:
        assert held is not None


def test_a_reservation_deerflow_reclaimed_is_marked_lost(database: DatabaseConfig):
    with rsv.reserve_checkpoint_write(database, "t1", lease_s=0.3) as held:
        assert held is not None
        with deerflow_connection(database) as conn:  # DeerFlow's claim_for_takeover after the lease expired
            conn.execute("UPDATE runs SET status = 'error'")
        time.sleep(0.5)
        assert held.lost
    assert _rows(database) == []


def test_without_deerflows_tables_nothing_is_reserved(tmp_path: Path):
    db = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path))
    sqlite3.connect(tmp_path / "deerflow.db").execute("CREATE TABLE checkpoints (x)").connection.close()
    assert not rsv.reservations_supported(db)
    with rsv.reserve_checkpoint_write(db, "t1") as held:
        assert held is None
    assert rsv.release_expired(db) == []
    assert rsv.active_run(db, "t1") is None


def test_bad_arguments_are_refused(database: DatabaseConfig):
    with pytest.raises(ValueError, match="lease_s"), rsv.reserve_checkpoint_write(database, "t1", lease_s=0):
        pass
    with pytest.raises(ValueError, match="owner"), rsv.reserve_checkpoint_write(database, "t1", owner="x:1"):
        pass


def test_owner_id_names_host_pid_and_node():
    assert rsv.owner_id("celery@w1", host="h", pid=42) == "checkpoint-admin:h:42:celery@w1"
    assert len(rsv.owner_id("n" * 300)) == 128


def _hold_then_hang(database: DatabaseConfig, lease_s: float) -> None:  # pragma: no cover - runs in the child
    with rsv.reserve_checkpoint_write(database, "t1", owner=rsv.owner_id("celery@killed"), lease_s=lease_s):
        time.sleep(600)


def test_a_sigkilled_holders_reservation_is_gone_within_one_lease_plus_one_sweep(database: DatabaseConfig):
    import multiprocessing
    import os
    import signal

    lease_s = 1.5
    child = multiprocessing.get_context("fork").Process(target=_hold_then_hang, args=(database, lease_s))
    child.start()
    try:
        deadline = time.monotonic() + 20
        while not rsv.held_reservations(database) and time.monotonic() < deadline:
            time.sleep(0.05)
        [held] = rsv.held_reservations(database)
        time.sleep(lease_s)  # the child renews its lease meanwhile: a sweep leaves a live holder alone
        assert rsv.release_expired(database) == []
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        killed_at = time.monotonic()
        assert [r.run_id for r in rsv.held_reservations(database)] == [held.run_id]  # the row outlives the kill
        with pytest.raises(DUPLICATE):  # and still holds the thread against DeerFlow until its lease ends
            insert_run(database, "t1", status="pending")
        time.sleep(lease_s + 0.2)
        assert rsv.release_expired(database) == [held.run_id]  # one sweep after one lease
        assert time.monotonic() - killed_at < 2 * lease_s + 1
        assert rsv.held_reservations(database) == []
        insert_run(database, "t1", status="pending")  # DeerFlow admits runs on the thread again
    finally:
        if child.is_alive():
            child.kill()


def test_a_thread_id_longer_than_deerflows_column_needs_no_reservation(database: DatabaseConfig):
    long_id = "t" * 200
    with rsv.reserve_checkpoint_write(database, long_id) as held:
        if database.backend == "postgres":  # VARCHAR(64): DeerFlow can hold no such thread
            assert held is None
        else:  # SQLite does not enforce the width: the row is taken as for any thread
            assert held is not None
    assert _rows(database) == []
