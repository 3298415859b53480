"""A writing process SIGKILLed while it holds DeerFlow's reservation (both backends, the whole real fixture with
DeerFlow's tables): the row outlives the kill and still holds the thread, and is gone within one lease plus one
sweep; the thread is untouched or pruned, never partial (the prune's own kill trials prove the latter)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.storage import reservation as rsv
from tests.backends import BACKENDS
from tests.configs import write_config
from tests.deerflow.convert.support import open_saver
from tests.deerflow_schema import create_deerflow_tables, insert_run
from tests.integration import helpers

LEASE_S = 5  # DASHBOARD_RESERVATION_LEASE_S's minimum
THREADS = ["delta-f10-200t", "delta-f10-100t", "delta-f100-150t", "delta-f10-50t"]


@pytest.fixture(params=BACKENDS)
def whole_fixture(request: pytest.FixtureRequest) -> DatabaseConfig:
    database = request.getfixturevalue(f"{request.param}_fixture_db_rw")
    with open_saver(database):
        pass
    create_deerflow_tables(database)
    return database


def test_a_killed_prune_leaves_its_reservation_for_one_lease_then_the_sweep_frees_the_thread(tmp_path,
                                                                                               whole_fixture):
    var = tmp_path / "var"
    var.mkdir()
    config = write_config(tmp_path / "config.yaml", whole_fixture, "delta")
    env = helpers.dashboard_env(config_path=config, var_dir=var, DASHBOARD_RESERVATION_LEASE_S=str(LEASE_S))
    args = [a for t in THREADS for a in ("--thread", t)]
    proc = subprocess.Popen([helpers.PYTHON, "manage.py", "prune_threads", *args, "--keep-last", "2", "--yes"],
                            cwd=helpers.REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        held: list[rsv.ActiveRun] = []
        deadline = time.monotonic() + 120
        while not held and proc.poll() is None and time.monotonic() < deadline:
            held = rsv.held_reservations(whole_fixture)
            if not held:
                time.sleep(0.005)
        assert held, "the prune finished (or never started) before a reservation was seen"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed = time.monotonic()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    rows = rsv.held_reservations(whole_fixture)  # a prune reserves a chunk of its threads at once
    assert [r.run_id for r in held][0] in [r.run_id for r in rows] and {r.thread_id for r in rows} <= set(THREADS)
    assert all(r.owner_worker_id.startswith("checkpoint-admin:") and r.owner_worker_id.endswith(":cli:prune_threads")
               for r in rows)
    for row in rows:
        with pytest.raises(Exception, match="(?i)unique|uq_runs_thread_active"):  # DeerFlow still gets its 409
            insert_run(whole_fixture, row.thread_id, status="pending")
    while rsv.release_expired(whole_fixture) == [] and time.monotonic() - killed < LEASE_S + 2:
        time.sleep(0.25)  # the beat's sweep, run more often than every minute here
    assert time.monotonic() - killed <= LEASE_S + 2
    assert rsv.held_reservations(whole_fixture) == []
    for row in rows:
        insert_run(whole_fixture, row.thread_id, status="pending")  # DeerFlow admits runs on the thread again
