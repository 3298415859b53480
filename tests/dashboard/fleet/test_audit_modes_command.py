"""``manage.py audit_modes [--json] [--threads]`` (in-process; the subprocess run is in the acceptance test)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from tests.dashboard.fleet.test_census import expected_class, manifest_snapshots

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("audit_modes", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code), out.getvalue()
    return 0, out.getvalue()


def test_json_threads_match_the_manifest(runtime_for, fixture_backend, manifest):
    backend, database = fixture_backend
    runtime_for(database, "delta", 10)
    code, out = run("--json", "--threads")
    body = json.loads(out)
    assert code == (1 if any(f["severity"] == "error" for f in body["findings"]) else 0)
    threads = {t["thread_id"]: t for t in body["threads"]}
    assert set(threads) == {t["thread_id"] for t in manifest["threads"]}
    for thread in manifest["threads"]:
        got = threads[thread["thread_id"]]
        assert set(got) == {"thread_id", "class", "inferred_snapshot_frequency", "inferred_exact", "cadences",
                            "multiple_cadences"}
        assert got["cadences"] == body["cadences"]["by_thread"].get(thread["thread_id"],
                                                                   {"exact": [], "lower_bound": None})
        assert got["class"] == expected_class(thread, backend), thread["thread_id"]
        has_counters = thread["backend_independent"]["marker_summary"]["with_counters_since_delta_snapshot"]
        if not has_counters:
            assert (got["inferred_snapshot_frequency"], got["inferred_exact"]) == (None, False)
        elif manifest_snapshots(thread, backend):
            assert (got["inferred_snapshot_frequency"], got["inferred_exact"]) == (thread["snapshot_frequency"], True)
        else:
            assert got["inferred_exact"] is False
            assert got["inferred_snapshot_frequency"] <= thread["snapshot_frequency"]
    assert body["census"]["migrated"] == 1 and body["census"]["inconsistent"] == 1


def test_json_without_threads(runtime_for, sqlite_fixture_db):
    runtime_for(sqlite_fixture_db, "delta", 10)
    _code, out = run("--json")
    assert "threads" not in json.loads(out)


def test_exit_code_follows_error_findings(runtime_for, empty_sqlite_db, process_row):
    runtime_for(empty_sqlite_db, "delta", 10)
    process_row("web")
    code, out = run()
    assert code == 0
    assert "processes: 1" in out and "census: full=0, delta=0" in out
    process_row("external", config_sha256="b" * 64)
    code, out = run()
    assert code == 0 and "WARNING config_differs" in out  # warnings do not fail cron
    w25 = process_row("worker", snapshot_frequency=25)
    code, out = run()
    assert code == 1
    assert "ERROR   cadence_mismatch" in out and w25.name in out and "snapshot_frequency 25 ≠ 10" in out
    code, out = run("--json")
    assert code == 1
    assert [f["code"] for f in json.loads(out)["findings"] if f["severity"] == "error"] == ["cadence_mismatch"]


def test_text_threads_listing(runtime_for, sqlite_fixture_db):
    runtime_for(sqlite_fixture_db, "delta", 10)
    _code, out = run("--threads")
    assert "  delta-f3-40t  delta  cadence=3\n" in out + "\n"
    assert "  delta-f10-1t  delta  cadence=≥3\n" in out
    assert "  markerless-delta-f10-13t  inconsistent  cadence=10" in out
