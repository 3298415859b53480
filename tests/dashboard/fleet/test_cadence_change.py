"""A cadence change after an exact proof (issue 13, "Reading", item 6).

A thread written at cadence 10 for 30 turns, then at 1,000 for 20 (its
counters grow to 40 without a snapshot): every cadence the data proves is
reported, then the lower bound the later counters prove ("10, then ≥41"),
the thread counts in ``threads_with_several`` (``cadence_outliers.multiple``)
and the audit's ``thread_multiple_cadences`` finding names it. Written by a
real graph on a real saver (``tests.dashboard.fleet.writes.write_turns``), on SQLite and
Postgres, read through the summary's cadence facts and by a scan.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.inventory import census
from deerflow.storage.savers import open_checkpointer
from tests import fixtures_real
from tests.backends import BACKENDS
from tests.dashboard.fleet.writes import write_turns


@pytest.fixture(params=BACKENDS)
def checkpoint_db(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        yield DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "sqlite"))
        return
    name, url = fixtures_real.create_database("dfa_cadence")
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)


@pytest.mark.parametrize("from_summary", [True, False], ids=["summary", "scan"])
def test_a_cadence_change_after_an_exact_proof_is_reported_and_counted(checkpoint_db, from_summary):
    write_turns(checkpoint_db, "changed", 30, snapshot_frequency=10)
    write_turns(checkpoint_db, "changed", 20, snapshot_frequency=1000, start=30)
    write_turns(checkpoint_db, "steady", 30, snapshot_frequency=10)
    with open_checkpointer(checkpoint_db) as saver:
        got = census.infer_cadences(saver, use_summary=from_summary)
        if from_summary:
            assert census._summary_cadences_ready(saver) is True
        outliers = census.cadence_outliers(saver, 10)
    changed, steady = got["changed"], got["steady"]
    assert changed.exact == [10] and changed.lower_bound is not None and changed.lower_bound >= 41
    assert changed.several and not changed.is_exact and changed.inferred is None
    assert changed.describe() == f"10, then ≥{changed.lower_bound}"
    assert steady.exact == [10] and steady.lower_bound is None and steady.is_exact and not steady.several
    assert steady.describe() == "10"
    assert outliers.multiple == 1 and [c.thread_id for c in outliers.multiple_examples] == ["changed"]
    assert outliers.multiple_examples[0].describe() == changed.describe()


def test_the_scan_counts_it_too(checkpoint_db, monkeypatch):
    write_turns(checkpoint_db, "changed", 30, snapshot_frequency=10)
    write_turns(checkpoint_db, "changed", 20, snapshot_frequency=1000, start=30)
    monkeypatch.setattr(census, "_summary_cadences_ready", lambda saver: False)
    with open_checkpointer(checkpoint_db) as saver:
        outliers = census.cadence_outliers(saver, 10)
    assert outliers.multiple == 1 and outliers.multiple_examples[0].describe().startswith("10, then ≥")


def test_the_audit_raises_the_finding(runtime_for, empty_sqlite_db, process_row):
    from dashboard.fleet.audit import run_audit
    from tests.dashboard.fleet.conftest import NO_LIVE

    write_turns(empty_sqlite_db, "changed", 30, snapshot_frequency=10)
    write_turns(empty_sqlite_db, "changed", 20, snapshot_frequency=1000, start=30)
    rt = runtime_for(empty_sqlite_db, "delta", 10)
    process_row("web", snapshot_frequency=10)
    audit = run_audit(rt, live=NO_LIVE, hours=1)
    assert audit.cadences["threads_with_several"] == 1
    (finding,) = [f for f in audit.findings if f.code == "thread_multiple_cadences"]
    assert finding.evidence.startswith("changed: [10], then ≥")


@pytest.mark.django_db
def test_the_cli_row_and_the_api_say_the_same(runtime_for, checkpoint_db, process_row, staff_client):
    """``audit_modes --json --threads`` and ``GET /api/audit?threads=1`` come from one function: the thread's row
    carries the exact cadences and the lower bound ``cadences.by_thread`` gives (existing keys unchanged)."""
    import io
    import json

    from django.core.management import call_command

    write_turns(checkpoint_db, "changed", 30, snapshot_frequency=10)
    write_turns(checkpoint_db, "changed", 20, snapshot_frequency=1000, start=30)
    runtime_for(checkpoint_db, "delta", 10)
    process_row("web", snapshot_frequency=10)
    api = staff_client.get("/api/audit?threads=1").json()
    out = io.StringIO()
    try:
        call_command("audit_modes", "--json", "--threads", stdout=out)
    except SystemExit:
        pass  # exit 1 on error findings; the JSON is printed first
    cli = json.loads(out.getvalue())
    by_thread = api["cadences"]["by_thread"]["changed"]
    assert by_thread["exact"] == [10] and by_thread["lower_bound"] >= 41
    assert cli["cadences"]["by_thread"]["changed"] == by_thread
    (row,) = [t for t in cli["threads"] if t["thread_id"] == "changed"]
    assert row == {"thread_id": "changed", "class": "delta", "inferred_snapshot_frequency": None,
                   "inferred_exact": False, "cadences": by_thread, "multiple_cadences": True}
    assert [t for t in api["threads"] if t["thread_id"] == "changed"] == [row]
    assert "thread_multiple_cadences" in {f["code"] for f in cli["findings"]} & {f["code"] for f in api["findings"]}
    text = io.StringIO()
    try:
        call_command("audit_modes", "--threads", stdout=text)
    except SystemExit:
        pass
    assert f"  changed  delta  cadence=10, then ≥{by_thread['lower_bound']} (several)" in text.getvalue()
