"""Issue 5 acceptance: a real web server and two real workers frozen at different cadences.

What this proves:

* ``manage.py runserver`` (through dashboard/wsgi.py) and two prefork Celery
  workers, frozen from config.yaml files asking for delta cadence 10 and 25,
  register themselves in one shared registry and heartbeat every second.
* ``manage.py audit_modes --json`` (a separate process, like cron) reports a
  ``cadence_mismatch`` error naming both workers ("snapshot_frequency 25 ≠
  10") and exits 1; the live check (our ``deerflow_facts`` control command
  over Redis) has both workers answering, with exactly the registry's facts.
* The web process serves the same audit at ``GET /api/audit`` and accepts an
  outside process's heartbeat at ``POST /api/processes/heartbeat``.
* Editing one worker's config.yaml on disk shows as ``config_drift`` for that
  worker after its next heartbeat, and a thread read routed to that worker
  answers 503 with the spec's detail and a hint naming both values, while
  the other worker keeps reading.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dashboard.fleet.control import live_check
from deerflow.errors import SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE
from tests import fixtures_real
from tests.dashboard.fleet.processes import FleetHome, Worker, findings
from tests.integration import helpers

# One worker runs the whole module in order under pytest-xdist (--dist loadgroup): the module-scoped fleet (a web
# server and several workers) is then built once, and each test sees the registry the earlier ones left, as serially.
pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("fleet-acceptance")]

FACT_KEYS = {"role", "host", "pid", "mode", "snapshot_frequency", "config_path", "config_sha256", "max_supersteps",
             "versions", "queues", "disk_sha256", "disk_mode", "disk_snapshot_frequency", "disk_error",
             "instance_id", "checkpoint_cache"}


@dataclass
class Fleet:
    home: FleetHome
    web: helpers.ManagedProcess
    web_url: str
    web_config: Path
    w10: Worker
    w25: Worker
    token: str


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    db = helpers.claim_empty_redis_db(f"fleet acceptance pid={os.getpid()}")
    home = None
    try:
        home = FleetHome.create(tmp_path_factory.mktemp("fleet-acceptance"), db)
        web_config = home.config("web.yaml", "delta", 10)
        token = home.issue_token(web_config)
        web, web_url = home.start_web(web_config)
        w10 = home.start_worker("w10", home.config("w10.yaml", "delta", 10))
        w25 = home.start_worker("w25", home.config("w25.yaml", "delta", 25))
        yield Fleet(home, web, web_url, web_config, w10, w25, token)
    finally:
        if home is not None:
            home.stop_all()
        helpers.flush_redis_db(db)


def _registered(fleet: Fleet) -> dict[str, dict]:
    """``{"web"|"w10"|"w25": registry row}`` once all three processes have registered."""
    pids = {"web": fleet.web.pid, "w10": fleet.w10.pid, "w25": fleet.w25.pid}

    def rows():
        by_pid = {r["pid"]: r for r in fleet.home.registry()}
        found = {k: by_pid.get(pid) for k, pid in pids.items()}
        return found if all(found.values()) else None

    return helpers.wait_until(rows, timeout=30, what="three registry rows")


def _live_audit(fetch, names, answered=()) -> tuple[int, dict]:
    """The first ``fetch()`` result ``(status, audit)`` in which every process in ``names`` is live (and every
    worker in ``answered`` answered the live check: pages serve the newest check, made in the background).

    Heartbeats here are 1 s apart and the audit shows a process stale after three
    missed beats, so on a loaded machine an audit can rightly leave a late process
    out of the comparison; the findings are asserted on an audit of the whole fleet.
    """
    def attempt():
        status, audit = fetch()
        states = {p["name"]: p["state"] for p in audit["processes"]}
        heard = set(audit["live"]["answered"])
        ok = all(states.get(n) == "live" for n in names) and heard >= set(answered)
        return (status, audit) if ok else None

    return helpers.wait_until(attempt, timeout=30, what="an audit with every process live")


def _http(fleet: Fleet, path: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        fleet.web_url + path, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {fleet.token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - local test server
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_every_process_registers_what_it_froze(fleet):
    rows = _registered(fleet)
    assert {k: (r["role"], r["mode"], r["snapshot_frequency"]) for k, r in rows.items()} == {
        "web": ("web", "delta", 10), "w10": ("worker", "delta", 10), "w25": ("worker", "delta", 25)}
    assert rows["web"]["config_path"] == str(fleet.web_config)
    assert rows["w25"]["config_path"] == str(fleet.w25.config_path)
    for row in rows.values():
        assert row["stopped_at"] is None and row["max_supersteps"] == 5000
        assert row["heartbeat_interval_s"] == 1.0
        assert json.loads(row["versions"])["langgraph"] != "missing"
    assert set(json.loads(rows["w25"]["queues"])) == {"w25", "dashboard", "checkpoints.delta"}
    assert json.loads(rows["web"]["queues"]) == []
    # Heartbeats keep coming (interval 1 s).
    first = rows["w10"]["last_heartbeat"]
    helpers.wait_until(lambda: fleet.home.row_for(fleet.w10.pid)["last_heartbeat"] > first, timeout=15,
                       what="a second heartbeat")


def test_audit_reports_the_cadence_mismatch_naming_both_workers(fleet):
    rows = _registered(fleet)
    code, audit = _live_audit(lambda: fleet.home.audit(fleet.web_config), [r["name"] for r in rows.values()])
    assert code == 1  # an error finding: cron and CI fail
    mismatch = findings(audit, "cadence_mismatch")
    assert len(mismatch) == 1, audit["findings"]
    message = mismatch[0]["message"]
    assert rows["w10"]["name"] in message and rows["w25"]["name"] in message
    assert "snapshot_frequency 25 ≠ 10" in message
    assert message == (f"{rows['w25']['name']} differs from {rows['web']['name']} and {rows['w10']['name']} "
                       "in: snapshot_frequency 25 ≠ 10")
    assert mismatch[0]["severity"] == "error"
    assert str(fleet.w25.config_path) in mismatch[0]["evidence"]
    # Live check: both workers answered our control command, nobody is silent or unregistered.
    assert audit["live"]["supported"] is True
    assert sorted(audit["live"]["answered"]) == sorted([fleet.w10.hostname, fleet.w25.hostname])
    assert audit["live"]["unregistered"] == []
    assert not findings(audit, "worker_silent") and not findings(audit, "live_differs")
    assert {p["name"]: p["state"] for p in audit["processes"]} == {r["name"]: "live" for r in rows.values()}
    assert not findings(audit, "config_drift")


def test_live_check_replies_carry_only_the_facts(fleet):
    rows = _registered(fleet)
    app = fleet.home.client_app()
    try:
        live = live_check(app, timeout_s=2.0)
    finally:
        app.close()
    assert live.supported and set(live.replies) == {fleet.w10.hostname, fleet.w25.hostname}
    for worker, key in ((fleet.w10, "w10"), (fleet.w25, "w25")):
        facts = live.replies[worker.hostname]
        assert set(facts) == FACT_KEYS  # nothing else: no broker URL, no settings
        assert facts["instance_id"] == rows[key]["instance_id"]
        assert facts["pid"] == worker.pid  # answered by the main process, which froze
        assert (facts["mode"], facts["snapshot_frequency"]) == ("delta", 10 if key == "w10" else 25)
        assert facts["config_sha256"] == rows[key]["config_sha256"]
        assert key in facts["queues"] and "checkpoints.delta" in facts["queues"]


def test_web_process_serves_the_audit_api(fleet):
    rows = _registered(fleet)
    status, audit = _live_audit(lambda: _http(fleet, "/api/audit?threads=1"), [r["name"] for r in rows.values()],
                                [fleet.w10.hostname, fleet.w25.hostname])
    assert status == 200
    assert [f["message"] for f in findings(audit, "cadence_mismatch")] == [
        f"{rows['w25']['name']} differs from {rows['web']['name']} and {rows['w10']['name']} "
        "in: snapshot_frequency 25 ≠ 10"]
    assert len(audit["threads"]) == len(fixtures_real.load_manifest()["threads"])
    assert sorted(audit["live"]["answered"]) == sorted([fleet.w10.hostname, fleet.w25.hostname])


def test_editing_a_workers_config_drifts_it_and_its_reads_answer_503(fleet):
    rows = _registered(fleet)
    app = fleet.home.client_app()
    try:
        before = fleet.home.materialize(app, "delta-f10-50t", fleet.w25.queue)
        assert "error" not in before, before
        assert before["snapshot_frequency"] == 25

        data = yaml.safe_load(fleet.w25.config_path.read_text())
        data["database"]["checkpoint_delta"]["snapshot_frequency"] = 40
        fleet.w25.config_path.write_text(yaml.safe_dump(data) + "# edited while running\n")
        previous = fleet.home.row_for(fleet.w25.pid)["last_heartbeat"]

        def drifted_beat():
            row = fleet.home.row_for(fleet.w25.pid)
            return row if row["last_heartbeat"] > previous and row["disk_snapshot_frequency"] == 40 else None

        row = helpers.wait_until(drifted_beat, timeout=20, proc=fleet.w25.proc, what="the next heartbeat")
        assert row["snapshot_frequency"] == 25  # still frozen

        code, audit = _live_audit(lambda: fleet.home.audit(fleet.web_config), [rows["w25"]["name"]])
        assert code == 1
        drift = findings(audit, "config_drift")
        assert [f["message"] for f in drift] == [
            f"{rows['w25']['name']} is mid cadence change: snapshot_frequency 25 (frozen) ≠ 40 (on disk)"]
        assert drift[0]["severity"] == "error" and "503" in drift[0]["hint"]
        assert str(fleet.w25.config_path) in drift[0]["evidence"]

        refused = fleet.home.materialize(app, "delta-f10-50t", fleet.w25.queue)
        assert refused["status"] == 503, refused
        assert refused["error"] == "checkpoint_mode_reconfiguration"
        assert refused["detail"] == SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE
        assert refused["detail"] == ("checkpoint_delta.snapshot_frequency is restart-required "
                                     "and cannot change in a running process")
        assert "frozen at 25" in refused["hint"] and "now 40" in refused["hint"]
        assert "Restart" in refused["hint"]
        assert "message_count" not in refused
        assert refused["pid"] in helpers.child_pids(fleet.w25.pid)

        # The other worker did not drift and keeps reading.
        expected = fixtures_real.manifest_threads()["delta-f10-50t"]["backends"]["sqlite"]["head"]
        still = fleet.home.materialize(app, "delta-f10-50t", fleet.w10.queue)
        assert "error" not in still, still
        assert (still["checkpoint_id"], still["messages_sha256"]) == (expected["checkpoint_id"],
                                                                      expected["messages_sha256"])
    finally:
        app.close()


def _readme_snippet() -> str:
    readme = (helpers.REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Fleet audit"):]
    return section[section.index("```python\n") + len("```python\n"):section.index("```\n", section.index("```python"))]


def test_outside_process_reports_itself_with_the_readme_snippet(fleet, monkeypatch):
    from deerflow.runtime.checkpoint_mode import freeze_checkpoint_channel_mode

    freeze_checkpoint_channel_mode("full")  # this test process plays a full-mode DeerFlow gateway
    monkeypatch.setenv("CHECKPOINT_ADMIN_URL", fleet.web_url + "/")
    monkeypatch.setenv("CHECKPOINT_ADMIN_TOKEN", fleet.token)
    namespace: dict = {}
    exec(compile(_readme_snippet(), "docs/operations.md", "exec"), namespace)  # noqa: S102 - our own docs
    namespace["report_to_checkpoint_admin"](str(fleet.web_config), every_s=3600)

    row = helpers.wait_until(lambda: next((r for r in fleet.home.registry() if r["pid"] == os.getpid()), None),
                             timeout=90, what="the snippet's heartbeat")
    assert (row["role"], row["mode"], row["snapshot_frequency"]) == ("external", "full", 10)
    assert row["config_path"] == str(fleet.web_config)
    assert row["config_sha256"] == fleet.home.row_for(fleet.web.pid)["config_sha256"]
    assert row["heartbeat_interval_s"] == 3600
    assert set(json.loads(row["versions"])) == {"langgraph", "langgraph-checkpoint"}

    everyone = [row["name"], *(r["name"] for r in _registered(fleet).values())]
    status, audit = _live_audit(lambda: _http(fleet, "/api/audit"), everyone)
    assert status == 200
    assert {p["name"]: p["role"] for p in audit["processes"]}[row["name"]] == "external"
    mismatch = findings(audit, "mode_mismatch")
    assert len(mismatch) == 1, audit["findings"]
    message = mismatch[0]["message"]
    assert message.startswith(f"{row['name']} differs from ")
    assert message.endswith(" in: checkpoint_channel_mode full ≠ delta")
    registered = _registered(fleet)
    assert registered["web"]["name"] in message
    # The workers are maintenance processes (delta whatever the fleet runs): never in a mode comparison.
    assert registered["w10"]["name"] not in message and registered["w25"]["name"] not in message

    status, bad = _http(fleet, "/api/processes/heartbeat", {"instance_id": "x"})
    assert status == 400 and {"detail", "hint"} <= set(bad)
