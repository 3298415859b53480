"""dashboard.fleet.audit: findings from registry rows, live replies and the data.

Registry rows are created directly (as heartbeats leave them); the
checkpoint data is real: an empty database, the real fixture, or threads
written here with LangGraph and DeerFlow's state schema.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.fleet.audit import run_audit, thread_census
from dashboard.fleet.control import LiveCheck
from deerflow import inventory
from deerflow.config.database_config import DatabaseConfig
from tests.dashboard.fleet.conftest import NO_LIVE, sha
from tests.dashboard.fleet.writes import write_turns

pytestmark = pytest.mark.django_db


def codes(audit) -> list[str]:
    return [f.code for f in audit.findings]


def only(audit, code: str):
    found = [f for f in audit.findings if f.code == code]
    assert len(found) == 1, f"expected one {code}, got {[(f.code, f.message) for f in audit.findings]}"
    return found[0]


@pytest.fixture
def rt(runtime_for, empty_sqlite_db):
    """The dashboard's own runtime on an empty checkpoint database (the data adds no findings)."""
    return runtime_for(empty_sqlite_db, "delta", 10)


# -- serving processes must agree ---------------------------------------------------------------

def test_agreeing_fleet_has_no_findings(rt, process_row):
    process_row("web")
    process_row("worker")
    process_row("worker")
    audit = run_audit(rt, live=LiveCheck(True))
    assert [f.code for f in audit.findings] == ["worker_silent", "worker_silent"]
    audit = run_audit(rt, live=NO_LIVE)
    assert codes(audit) == ["live_check_unavailable"]
    assert not audit.has_errors
    assert {p["state"] for p in audit.processes} == {"live"}


def test_modes_differ(rt, process_row):
    web = process_row("web", mode="full")
    worker = process_row("external", mode="delta")
    audit = run_audit(rt, live=NO_LIVE)
    f = only(audit, "mode_mismatch")
    assert f.severity == "error" and audit.has_errors
    assert f.message == f"{worker.name} differs from {web.name} in: checkpoint_channel_mode delta ≠ full"
    assert worker.name in f.evidence and web.name in f.evidence and "/etc/deerflow/config.yaml" in f.evidence
    assert "restart them together" in f.hint
    assert audit.findings[0].severity == "error"  # errors sort first


def test_cadences_differ_names_every_process_on_both_sides(rt, process_row):
    web = process_row("web", snapshot_frequency=10)
    w10 = process_row("worker", snapshot_frequency=10)
    w25 = process_row("worker", snapshot_frequency=25)
    audit = run_audit(rt, live=NO_LIVE)
    f = only(audit, "cadence_mismatch")
    assert f.severity == "error"
    assert f.message == f"{w25.name} differs from {web.name} and {w10.name} in: snapshot_frequency 25 ≠ 10"
    assert "mode_mismatch" not in codes(audit)


def test_full_web_does_not_mask_cadence_mismatch_between_delta_processes(rt, process_row):
    web = process_row("web", mode="full")
    w10 = process_row("external", snapshot_frequency=10)
    w25 = process_row("external", snapshot_frequency=25)
    audit = run_audit(rt, live=NO_LIVE)
    mode = only(audit, "mode_mismatch")
    assert mode.message == (f"{w10.name} and {w25.name} differ from {web.name} in: "
                            "checkpoint_channel_mode delta ≠ full")
    cadence = only(audit, "cadence_mismatch")
    assert cadence.message == f"{w25.name} differs from {w10.name} in: snapshot_frequency 25 ≠ 10"


def test_maintenance_workers_in_a_full_fleet_are_not_drift(rt, process_row):
    """The dashboard's workers freeze delta whatever the fleet runs: not a mode mismatch, not a readiness item,
    not a blocker of compaction's guard (they serve no DeerFlow user)."""
    from dashboard.jobs.compaction import full_mode_processes

    web = process_row("web", mode="full", disk_mode="full")
    worker = process_row("worker", mode="delta", disk_mode="full", queues=["dashboard", "checkpoints.delta"])
    audit = run_audit(rt, live=NO_LIVE)
    assert codes(audit) == ["live_check_unavailable"]
    assert {p["name"]: p["maintenance"] for p in audit.processes} == {web.name: False, worker.name: True}
    assert audit.readiness["to_full"][1] == {
        "ok": True, "text": "processes to restart together with a full-mode config.yaml: none"}
    old_full_worker = process_row("worker", mode="full")
    assert [p.name for p in full_mode_processes()] == [web.name]
    assert old_full_worker.name not in " ".join(f.message for f in run_audit(rt, live=NO_LIVE).findings)


def test_a_maintenance_worker_at_another_cadence_is_a_cadence_mismatch(rt, process_row):
    web = process_row("web", snapshot_frequency=10)
    worker = process_row("worker", snapshot_frequency=25)
    f = only(run_audit(rt, live=NO_LIVE), "cadence_mismatch")
    assert f.message == f"{worker.name} differs from {web.name} in: snapshot_frequency 25 ≠ 10"


def test_full_processes_ignore_cadence(rt, process_row):
    process_row("web", mode="full", snapshot_frequency=10, config_sha256=sha("same"))
    process_row("worker", mode="full", snapshot_frequency=99, config_sha256=sha("same"))
    assert codes(run_audit(rt, live=NO_LIVE)) == ["live_check_unavailable"]


def test_same_mode_and_cadence_but_different_config_files(rt, process_row):
    web = process_row("web", config_sha256=sha("a"), config_path="/srv/a/config.yaml")
    worker = process_row("external", config_sha256=sha("b"), config_path="/srv/b/config.yaml")
    audit = run_audit(rt, live=NO_LIVE)
    f = only(audit, "config_differs")
    assert f.severity == "warning" and not audit.has_errors
    assert f.message == (f"{worker.name} and {web.name} agree on mode and cadence "
                         "but read different config.yaml files")
    assert sha("b")[:12] in f.evidence and sha("a")[:12] in f.evidence
    assert "/srv/b/config.yaml" in f.evidence and "/srv/a/config.yaml" in f.evidence


def test_outside_process_without_config_hash_is_not_a_config_difference(rt, process_row):
    process_row("web")
    process_row("external", config_sha256="", disk_sha256="", disk_mode="", disk_snapshot_frequency=None)
    assert "config_differs" not in codes(run_audit(rt, live=NO_LIVE))


# -- liveness -----------------------------------------------------------------------------------

def test_gone_after_its_lease_an_info_and_never_drift(rt, process_row):
    """A process killed without a clean stop (SIGKILL, a lost host) is gone once its lease (three intervals)
    runs out: an info finding, never a mode mismatch or a drift, whatever it froze."""
    process_row("web")
    fresh = process_row("worker", age_s=2.5 * 15)
    gone = process_row("external", age_s=3.5 * 15, mode="full", disk_mode="delta")
    fast = process_row("external", age_s=4.0, heartbeat_interval_s=1.0)
    audit = run_audit(rt, live=NO_LIVE)
    states = {p["name"]: p["state"] for p in audit.processes}
    assert (states[fresh.name], states[gone.name], states[fast.name]) == ("live", "gone", "gone")
    gone_findings = [f for f in audit.findings if f.code == "process_gone"]
    assert {f.message.split(" is gone")[0] for f in gone_findings} == {gone.name, fast.name}
    assert all(f.severity == "info" for f in gone_findings) and not audit.has_errors
    assert "45 s" in next(f.evidence for f in gone_findings if gone.name in f.message)
    assert not {"mode_mismatch", "config_drift", "stale_process"} & set(codes(audit))


def test_stopped_processes_are_ignored(rt, process_row):
    process_row("web")
    gone = process_row("worker", mode="full", stopped=True, age_s=3600, queues=["checkpoints.delta"],
                       disk_mode="delta")
    audit = run_audit(rt, live=NO_LIVE)
    assert codes(audit) == ["live_check_unavailable"]
    assert {p["name"]: p["state"] for p in audit.processes}[gone.name] == "stopped"
    assert audit.readiness["to_delta"][1]["ok"]  # no full process left to restart


# -- per-process checks -------------------------------------------------------------------------

def test_worker_consuming_the_other_mode_queue(rt, process_row):
    process_row("web")
    worker = process_row("worker", queues=["dashboard", "checkpoints.delta", "checkpoints.full"])
    f = only(run_audit(rt, live=NO_LIVE), "queue_mode_mismatch")
    assert f.severity == "error"
    assert f.message == f"{worker.name} (delta) consumes checkpoints.full"
    assert "checkpoints.delta" in f.hint


@pytest.mark.parametrize(("disk", "expected"), [
    ({"disk_mode": "full", "disk_sha256": sha("full")},
     "mid mode-flip: checkpoint_channel_mode delta (frozen) ≠ full (on disk)"),
    ({"disk_snapshot_frequency": 25, "disk_sha256": sha("25")},
     "mid cadence change: snapshot_frequency 10 (frozen) ≠ 25 (on disk)"),
])
def test_config_drift(rt, process_row, disk, expected):
    agent = process_row("external", **disk)
    audit = run_audit(rt, live=NO_LIVE)
    f = only(audit, "config_drift")
    assert f.severity == "error"
    assert f.message == f"{agent.name} is {expected}"
    assert "503" in f.hint and "restart" in f.hint


def test_a_maintenance_worker_drifts_only_on_cadence(rt, process_row):
    process_row("worker", disk_mode="full", disk_sha256=sha("full"))
    assert "config_drift" not in codes(run_audit(rt, live=NO_LIVE))
    worker = process_row("worker", disk_mode="full", disk_snapshot_frequency=25, disk_sha256=sha("full 25"))
    f = only(run_audit(rt, live=NO_LIVE), "config_drift")
    assert f.message == f"{worker.name} is mid cadence change: snapshot_frequency 10 (frozen) ≠ 25 (on disk)"


def test_config_edited_without_mode_change_is_a_warning(rt, process_row):
    process_row("worker", disk_sha256=sha("comment added"))
    f = only(run_audit(rt, live=NO_LIVE), "config_edited")
    assert f.severity == "warning"


def test_unreadable_config_is_not_drift(rt, process_row):
    worker = process_row("worker", disk_sha256="", disk_mode="", disk_snapshot_frequency=None,
                         disk_error="/etc/deerflow/config.yaml: No such file or directory")
    audit = run_audit(rt, live=NO_LIVE)
    assert "config_drift" not in codes(audit)
    f = only(audit, "config_unreadable")
    assert f.severity == "warning" and worker.name in f.message and "No such file" in f.evidence
    assert "keeps serving" in f.hint


# -- live check ---------------------------------------------------------------------------------

def _reply(row, **overrides) -> dict:
    facts = {"instance_id": row.instance_id, "role": "worker", "host": row.host, "pid": row.pid,
             "mode": row.mode, "snapshot_frequency": row.snapshot_frequency, "config_path": row.config_path,
             "config_sha256": row.config_sha256, "max_supersteps": 5000, "versions": {}, "queues": row.queues,
             "disk_sha256": row.disk_sha256, "disk_mode": row.disk_mode,
             "disk_snapshot_frequency": row.disk_snapshot_frequency, "disk_error": ""}
    facts.update(overrides)
    return facts


def test_live_check_answers(rt, process_row):
    process_row("web")
    answering = process_row("worker")
    silent = process_row("worker")
    differing = process_row("worker")
    live = LiveCheck(True, {"a@h": _reply(answering), "c@h": _reply(differing, snapshot_frequency=25)})
    audit = run_audit(rt, live=live)
    assert audit.live == {"supported": True, "error": None, "answered": ["a@h", "c@h"], "unregistered": []}
    assert only(audit, "worker_silent").message == f"{silent.name} did not answer the live check"
    f = only(audit, "live_differs")
    assert f.message == "c@h answers differently from its registry row"
    assert f.evidence == "snapshot_frequency 25 ≠ 10"


def test_unregistered_worker_answering_is_compared_too(rt, process_row):
    web = process_row("web")
    stranger = {"instance_id": "", "role": "worker", "host": "host-9", "pid": 9, "mode": "delta",
                "snapshot_frequency": 25, "config_path": "/srv/other.yaml", "config_sha256": sha("x"),
                "queues": ["checkpoints.delta"], "disk_mode": "delta", "disk_snapshot_frequency": 25,
                "disk_sha256": sha("x"), "disk_error": ""}
    audit = run_audit(rt, live=LiveCheck(True, {"stranger@host-9": stranger}))
    assert audit.live["unregistered"] == ["stranger@host-9"]
    assert only(audit, "worker_unregistered").severity == "warning"
    assert only(audit, "cadence_mismatch").message == (
        f"stranger@host-9 differs from {web.name} in: snapshot_frequency 25 ≠ 10")
    assert [p["name"] for p in audit.processes] == [web.name]  # the registry table lists registry rows


def test_live_check_unavailable_is_reported_not_raised(rt, process_row):
    process_row("worker")
    audit = run_audit(rt, live=LiveCheck(False, error="broker unreachable: refused"))
    f = only(audit, "live_check_unavailable")
    assert f.severity == "info" and f.evidence == "broker unreachable: refused"
    assert "worker_silent" not in codes(audit)
    assert audit.live["supported"] is False


# -- what the data says -------------------------------------------------------------------------

@pytest.fixture
def fresh_writes(sqlite_fixture_db_rw: DatabaseConfig) -> DatabaseConfig:
    """A private fixture copy plus delta threads written just now (inside any window)."""
    write_turns(sqlite_fixture_db_rw, "recent-delta-f4", 3, snapshot_frequency=4)
    write_turns(sqlite_fixture_db_rw, "recent-markerless-f5", 6, snapshot_frequency=5, marker=False)
    return sqlite_fixture_db_rw


def test_delta_writes_with_an_all_full_fleet(runtime_for, fresh_writes, process_row):
    rt = runtime_for(fresh_writes, "full")
    process_row("web", mode="full")
    process_row("worker", mode="full")
    audit = run_audit(rt, live=NO_LIVE, hours=1)
    f = only(audit, "delta_writes_full_fleet")
    assert f.severity == "error"
    assert f.message == ("delta checkpoints were written in the last 1 h, "
                         "but every registered process is in full mode")
    assert audit.writers["delta_marked"] > 0 and audit.writers["counters_only"] > 0
    assert f.evidence.startswith(f"{audit.writers['delta_marked'] + audit.writers['counters_only']} delta checkpoints")
    assert only(audit, "markerless_writes").severity == "warning"
    cadences = only(audit, "writer_cadences")
    assert "[4, 5]" in cadences.message
    assert not audit.readiness["to_full"][2]["ok"]


def test_delta_writes_with_a_delta_fleet_are_expected(runtime_for, fresh_writes, process_row):
    rt = runtime_for(fresh_writes, "delta", 4)
    process_row("web", snapshot_frequency=4)
    audit = run_audit(rt, live=NO_LIVE, hours=1)
    assert "delta_writes_full_fleet" not in codes(audit)
    assert audit.cadences["fleet"] == 4


def test_full_writes_only_raise_nothing(runtime_for, empty_sqlite_db, process_row):
    write_turns(empty_sqlite_db, "recent-full", 2, mode="full")
    rt = runtime_for(empty_sqlite_db, "full")
    process_row("web", mode="full")
    audit = run_audit(rt, live=NO_LIVE, hours=1)
    assert codes(audit) == ["live_check_unavailable"]
    assert audit.writers["checkpoints"] == 6 and audit.writers["plain"] == 6
    assert all(item["ok"] for item in audit.readiness["to_full"])


def staff_page(audit) -> str:
    from django.template.loader import render_to_string

    return render_to_string("fleet/_audit_body.html", {"audit": audit})


def test_threads_at_another_cadence_than_the_fleet(runtime_for, sqlite_fixture_db, process_row):
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    process_row("web", snapshot_frequency=10)
    audit = run_audit(rt, live=NO_LIVE)
    f = only(audit, "thread_cadence_differs")
    assert f.message == "2 threads were written at a cadence other than the fleet's 10"
    assert f.evidence == "delta-f100-150t: [100], delta-f3-40t: [3]"
    # The threads that prove it, linked, with their last writes however old (the fixture's are months old).
    assert [(t["thread_id"], t["url"], t["cadences"]) for t in f.threads] == [
        ("delta-f100-150t", "/threads/delta-f100-150t/", [100]), ("delta-f3-40t", "/threads/delta-f3-40t/", [3])]
    for t in f.threads:
        assert t["last_write"] == inventory.get_thread_summary(rt.saver, t["thread_id"]).updated_at.isoformat()
    page = staff_page(audit)
    assert 'href="/threads/delta-f100-150t/"' in page and "last write <time" in page
    assert audit.cadences == {"fleet": 10, "threads_with_several": 0, "threads_differing_from_fleet": 2}
    assert audit.threads == []  # one row per thread only when asked
    listed = run_audit(rt, live=NO_LIVE, with_threads=True)
    assert listed.cadences["by_thread"]["delta-f10-1t"] == {"exact": [], "lower_bound": 3}
    assert len(listed.threads) == 27


def test_thread_written_at_two_cadences(runtime_for, empty_sqlite_db, process_row):
    write_turns(empty_sqlite_db, "mixed", 4, snapshot_frequency=4)
    write_turns(empty_sqlite_db, "mixed", 6, snapshot_frequency=9, start=4)
    rt = runtime_for(empty_sqlite_db, "delta", 9)
    process_row("web", snapshot_frequency=9)
    audit = run_audit(rt, live=NO_LIVE, hours=1)
    assert only(audit, "thread_multiple_cadences").evidence == "mixed: [4, 9]"
    assert only(audit, "thread_cadence_differs").evidence == "mixed: [4, 9]"


# -- readiness ----------------------------------------------------------------------------------

def test_readiness_checklists(runtime_for, sqlite_fixture_db, process_row):
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    web = process_row("web")
    worker = process_row("web")
    full_worker = process_row("web", mode="full", stopped=True)
    counts, _ = thread_census(rt)
    audit = run_audit(rt, live=NO_LIVE, hours=1)
    to_full = audit.readiness["to_full"]
    need = counts["delta"] + counts["delta_counters_only"] + counts["migrated"] + counts["inconsistent"]
    assert need == 19  # 17 delta, 1 migrated, 1 marker-less (inconsistent) in the fixture
    assert to_full[0] == {"ok": False, "text": "19 threads still need conversion to full",
                          "link": "/threads/?mode=delta"}
    assert not to_full[1]["ok"]
    assert to_full[1]["text"] == ("processes to restart together with a full-mode config.yaml: "
                                  f"{web.name}, {worker.name}")
    assert full_worker.name not in to_full[1]["text"]
    to_delta = audit.readiness["to_delta"]
    assert to_delta[0]["ok"]
    assert to_delta[1] == {"ok": True, "text": "processes to restart together with a delta-mode config.yaml: none"}


def test_readiness_offers_compacting_legacy_threads_with_the_bytes_it_frees(runtime_for, sqlite_fixture_db):
    """Item 4 of issue 11: the delta checklist's "compact legacy threads", from the summary and the measured ratio."""
    from dashboard.jobs.models import ConversionJob

    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    by_class = inventory.storage_by_class(rt.saver)
    legacy = by_class["full"]["bytes_total"] + by_class["migrated"]["bytes_total"]
    assert (by_class["full"]["threads"], by_class["migrated"]["threads"]) == (8, 1) and legacy > 0
    item = run_audit(rt, live=NO_LIVE, hours=1).readiness["to_delta"][2]
    assert (item["ok"], item["threads"], item["bytes_total"], item["bytes_freed"]) == (False, 9, legacy, None)
    assert item["text"].endswith("run a compaction dry run of them for the bytes it would free")
    assert item["link"] == "/threads/?mode=full"

    dry = ConversionJob.objects.create(kind="compact_dry_run", state="succeeded")
    dry.results.create(thread_id="full-a", status="needs_compaction", bytes_before=1000, bytes_after=250)
    dry.results.create(thread_id="delta-b", status="already_delta", bytes_before=500, bytes_after=500)
    done = ConversionJob.objects.create(kind="compact", state="succeeded")
    done.results.create(thread_id="full-b", status="compacted", bytes_before=3000, bytes_after=750)
    item = run_audit(rt, live=NO_LIVE, hours=1).readiness["to_delta"][2]
    assert item["bytes_freed"] == int(legacy * 0.75)  # (4000 - 1000) / 4000 of the legacy bytes
    assert "would free about" in item["text"] and "(75%, the share the 2 measured compactions freed)" in item["text"]


def test_census_counts_every_class(runtime_for, sqlite_fixture_db):
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    counts, summaries = thread_census(rt)
    assert counts == {"full": 8, "delta": 17, "delta_counters_only": 0, "migrated": 1, "inconsistent": 1}
    assert sum(counts.values()) == len(summaries) == 27


def test_as_dict_shape(runtime_for, sqlite_fixture_db, process_row):
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    process_row("web")
    audit = run_audit(rt, live=NO_LIVE)
    out = audit.as_dict()
    assert set(out) == {"generated_at", "processes", "live", "findings", "census", "cadences", "writers",
                        "readiness", "orphans", "history_cache"}
    assert out["orphans"] is None  # no DeerFlow threads_meta beside the fixture
    # threads: the threads that prove it (cadence findings), empty for the others
    assert set(out["findings"][0]) == {"severity", "code", "message", "evidence", "hint", "threads"}
    assert audit.as_dict(with_threads=True)["threads"] == []  # not computed unless asked for
    threads = run_audit(rt, live=NO_LIVE, with_threads=True).as_dict(with_threads=True)["threads"]
    assert len(threads) == 27
    by_id = {t["thread_id"]: t for t in threads}
    assert by_id["delta-f3-40t"] == {"thread_id": "delta-f3-40t", "class": "delta",
                                     "inferred_snapshot_frequency": 3, "inferred_exact": True,
                                     "cadences": {"exact": [3], "lower_bound": None}, "multiple_cadences": False}
    assert by_id["delta-f10-1t"]["inferred_exact"] is False
    assert by_id["full-tools-30t"]["inferred_snapshot_frequency"] is None
    generated = dt.datetime.fromisoformat(out["generated_at"])
    assert abs((timezone.now() - generated).total_seconds()) < 60


def test_processes_with_different_supersteps_bounds(rt, process_row):
    web = process_row("web", max_supersteps=5000)
    worker = process_row("worker", max_supersteps=50)
    process_row("external", max_supersteps=None)  # an outside process that did not say
    f = only(run_audit(rt, live=NO_LIVE), "max_supersteps_differs")
    assert f.severity == "warning"
    assert f.message == ("processes see different LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT values: "
                         f"5000: {web.name}; 50: {worker.name}")


def test_cadence_inference_uses_the_fleets_smallest_supersteps_bound(runtime_for, sqlite_fixture_db, process_row):
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    process_row("web", max_supersteps=5000)
    assert run_audit(rt, live=NO_LIVE, with_threads=True).cadences["by_thread"]["delta-f3-40t"] == {
        "exact": [3], "lower_bound": None}
    # A process whose bound is 1 could have snapshotted anywhere: no snapshot proves a cadence then.
    process_row("worker", max_supersteps=1)
    audit = run_audit(rt, live=NO_LIVE, with_threads=True)
    assert audit.cadences["by_thread"]["delta-f3-40t"] == {"exact": [], "lower_bound": 3}
    assert "thread_cadence_differs" not in codes(audit)


# -- the summary-derived facts are cached under the summary's version ---------------------------------

@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_cached_summary_facts_equal_a_fresh_computation_after_new_writes(runtime_for, request, tmp_path, backend):
    from dashboard.fleet.audit import summary_facts
    from deerflow.inventory import census, summary

    database = (DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "cached")) if backend == "sqlite"
                else request.getfixturevalue("empty_postgres_db"))
    write_turns(database, "steady", 12, snapshot_frequency=9)
    rt = runtime_for(database, "delta", 9)

    def uncached():
        return inventory.storage_by_class(rt.saver), census.cadence_outliers(rt.saver, 9, 5000)

    first = summary_facts(rt, 9, 5000)
    version = summary.version(rt.saver)
    assert first == uncached() and first[1].multiple == 0 and first[0]["delta"]["threads"] == 1
    assert summary_facts(rt, 9, 5000) == first and summary.version(rt.saver) == version  # served from the cache
    # New writes: a second cadence on the thread and a new full-mode thread. The next read refreshes
    # the summary inline (few new checkpoints), which bumps the version, so nothing stale is served.
    write_turns(database, "steady", 6, snapshot_frequency=4, start=12)
    write_turns(database, "legacy", 2, mode="full")
    second = summary_facts(rt, 9, 5000)
    assert summary.version(rt.saver) > version
    assert second == uncached() != first
    assert second[1].multiple == 1 and second[0]["full"]["threads"] == 1
    # A thread rewritten under the same ids (what a conversion does) is recomputed by refresh_threads.
    rt.saver.delete_thread("legacy")
    summary.refresh_threads(rt.saver, ["legacy"])
    third = summary_facts(rt, 9, 5000)
    assert third == uncached() and third[0]["full"]["threads"] == 0
    audit = run_audit(rt, live=NO_LIVE)
    assert audit.census == {c: third[0][c]["threads"] for c in inventory.THREAD_CLASSES}
    assert audit.storage == inventory.storage_by_mode(rt.saver)
    assert audit.cadences["threads_with_several"] == 1
