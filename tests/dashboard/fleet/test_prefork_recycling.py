"""A prefork child recycled after config.yaml was edited keeps the parent's frozen mode and cadence.

A worker runs one task per child (``--max-tasks-per-child=1``). Workers are
maintenance processes that freeze delta whatever mode the file names, so an
edit to ``checkpoint_channel_mode: full`` changes nothing for them: the next
child still reads. An edit of the cadence is a drift: tasks run in new child
processes, including one forked after the edit, each still reports the frozen
cadence (inherited from the main process's freeze; the child never re-reads
the file) and refuses to read with the spec's 503. Recycling children does
not mark the worker stopped, and its next heartbeat shows the drift.
"""

from __future__ import annotations

import os

import pytest
import yaml

from deerflow.errors import SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE
from tests import fixtures_real
from tests.dashboard.fleet.processes import FleetHome, findings
from tests.integration import helpers

pytestmark = pytest.mark.redis

THREAD = "delta-f10-50t"


@pytest.fixture
def home(tmp_path):
    db = helpers.claim_empty_redis_db(f"fleet prefork pid={os.getpid()}")
    fleet = None
    try:
        fleet = FleetHome.create(tmp_path, db)
        yield fleet
    finally:
        if fleet is not None:
            fleet.stop_all()
        helpers.flush_redis_db(db)


def test_recycled_child_keeps_the_parents_frozen_mode(home):
    config = home.config("worker.yaml", "delta", 10)
    worker = home.start_worker("pf", config, "--max-tasks-per-child=1")
    app = home.client_app()
    try:
        first = home.materialize(app, THREAD, worker.queue)
        assert "error" not in first, first
        assert first["mode"] == "delta"
        head = fixtures_real.manifest_threads()[THREAD]["backends"]["sqlite"]["head"]
        assert first["messages_sha256"] == head["messages_sha256"]

        data = yaml.safe_load(config.read_text())
        data["database"]["checkpoint_channel_mode"] = "full"
        config.write_text(yaml.safe_dump(data))
        mode_edited = home.materialize(app, THREAD, worker.queue)
        assert "error" not in mode_edited and mode_edited["mode"] == "delta", mode_edited  # not a drift for it

        data["database"]["checkpoint_delta"] = {"snapshot_frequency": 25}
        config.write_text(yaml.safe_dump(data))
        children_at_edit = helpers.child_pids(worker.pid)

        second = home.materialize(app, THREAD, worker.queue)
        third = home.materialize(app, THREAD, worker.queue)
    finally:
        app.close()

    pids = [first["pid"], second["pid"], third["pid"]]
    assert len(set(pids)) == 3, f"each task must run in a new child: {pids}"
    assert all(pid != worker.pid for pid in pids)
    assert third["pid"] not in children_at_edit, "the third child must have been forked after the edit"
    for result in (second, third):
        assert result["mode"] == "delta", result  # the parent's frozen mode, not the file's
        assert result["snapshot_frequency"] == 10
        assert result["status"] == 503, result
        assert result["error"] == "checkpoint_mode_reconfiguration"
        assert result["detail"] == SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE
        assert "frozen at 10" in result["hint"] and "now 25" in result["hint"]
        assert "message_count" not in result

    # The worker's main process is still the registered, live process; its heartbeat shows the drift.
    def drift_seen():
        row = home.row_for(worker.pid)
        return row if row and row["disk_snapshot_frequency"] == 25 else None

    row = helpers.wait_until(drift_seen, timeout=20, proc=worker.proc, what="a heartbeat seeing the edit")
    assert row["mode"] == "delta" and row["stopped_at"] is None
    assert [r["pid"] for r in home.registry()] == [worker.pid]  # children never register
    code, audit = home.audit(config)
    assert code == 1
    assert [f["message"] for f in findings(audit, "config_drift")] == [
        f"{row['name']} is mid cadence change: snapshot_frequency 10 (frozen) ≠ 25 (on disk)"]
    assert {p["name"]: p["state"] for p in audit["processes"]} == {row["name"]: "live"}
