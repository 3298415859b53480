"""``manage.py seed_threads``, ``manage.py refresh_inventory`` and the periodic Celery task, on a real database."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from dashboard.formatting import plural
from deerflow import inventory
from deerflow.config.database_config import DatabaseConfig
from deerflow.storage import reader_for
from deerflow.storage.savers import open_checkpointer
from tests.backends import BACKENDS
from tests.configs import write_config
from tests.dashboard.html import parse
from tests.dashboard.writes import write_thread
from tests.scale.conftest import walk

pytestmark = pytest.mark.django_db


@pytest.fixture
def database(tmp_path, settings, runtime_for) -> DatabaseConfig:
    db = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data"))
    settings.DEER_FLOW_CONFIG_PATH = str(write_config(tmp_path / "config.yaml", db, "delta", 4))
    return db


def test_seed_threads_writes_and_summarizes(database, runtime_for):
    out = StringIO()
    call_command("seed_threads", "--threads", "30", "--turns-min", "2", "--turns-max", "5", "--mode", "delta",
                 "--snapshot-frequency", "4", "--seed", "cmd", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["seed"]["threads"] == 30 and report["summary"]["kind"] == "full"
    assert report["summary"]["threads"] == 30
    with open_checkpointer(database) as saver:
        counts = inventory.class_counts(saver, refresh=False)
    assert counts["delta"] == 30


def test_seed_threads_reports_bytes_as_the_dashboard_shows_them(database):
    """The seeder's byte total uses the dashboard's units (Django's filesizeformat), so the two can be compared."""
    from django.template.defaultfilters import filesizeformat

    out = StringIO()
    call_command("seed_threads", "--threads", "4", "--turns-min", "1", "--turns-max", "2", "--mode", "full",
                 "--seed", "units", stdout=out)
    with open_checkpointer(database) as saver:
        total = sum(t.bytes_total for t in inventory.list_threads(saver, limit=100)[0])
    wrote = next(line for line in out.getvalue().splitlines() if line.startswith("Wrote 4 threads"))
    assert f"blobs, {filesizeformat(total)}) in " in wrote, (wrote, total)


def test_seed_threads_rejects_a_bad_plan(database):
    with pytest.raises(CommandError, match="--turns-min must not be greater than --turns-max"):
        call_command("seed_threads", "--threads", "3", "--turns-min", "5", "--turns-max", "2")


def test_refresh_inventory_command_and_task(database, runtime_for):
    call_command("seed_threads", "--threads", "5", "--turns-max", "3", "--mode", "mixed", "--seed", "t",
                 stdout=StringIO())
    runtime_for(database, "delta", 4)
    out = StringIO()
    call_command("refresh_inventory", "--full", "--json", stdout=out)
    assert json.loads(out.getvalue())["kind"] == "full"
    out = StringIO()
    call_command("refresh_inventory", stdout=out)
    assert out.getvalue().startswith("Thread summary: incremental refresh")
    from dashboard.threads.tasks import refresh_summary

    assert refresh_summary.apply(kwargs={"full": True}).get()["threads"] == 5
    assert refresh_summary.apply().get()["kind"] == "incremental"


# -- seeding a database whose summary is already built (the real fixture) ------------------

def _api_ids(client) -> set[str]:
    ids, cursor = [], None
    while True:
        body = client.get("/api/threads", {"limit": 10, **({"cursor": cursor} if cursor else {})}).json()
        ids += [t["thread_id"] for t in body["threads"]]
        if (cursor := body["next_cursor"]) is None:
            assert len(ids) == len(set(ids))
            return set(ids)


def _count(saver) -> int:
    return int(reader_for(saver).query("SELECT COUNT(*) AS n FROM checkpoints")[0]["n"])


SEED_7 = ["seed_threads", "--threads", "5", "--turns-min", "1", "--turns-max", "3", "--mode", "delta",
          "--snapshot-frequency", "10", "--seed", "7"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_seeding_below_the_watermark_lists_every_seeded_thread_and_refuses_a_second_run(
        backend, request, tmp_path, settings, runtime_for, staff_client):
    from deerflow.inventory import summary

    database = request.getfixturevalue(f"{backend}_fixture_db_rw")
    settings.DEER_FLOW_CONFIG_PATH = str(write_config(tmp_path / "config.yaml", database, "delta", 10))
    runtime_for(database, "delta")
    assert len(_api_ids(staff_client)) == 27  # builds the summary
    write_thread(database, "newest", mode="delta")  # the watermark moves to now, past every id seeded next
    fixture_ids = _api_ids(staff_client)
    assert len(fixture_ids) == 28
    out = StringIO()
    call_command(*SEED_7, stdout=out)
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith("Summary refreshed: 5 threads (with their rows)"), last
    with open_checkpointer(database) as saver:
        listed = {s.thread_id for s in walk(saver, limit=7)}
        seeded_ids = listed - fixture_ids
        assert len(listed) == 33 and len(seeded_ids) == 5
        marks = reader_for(saver).query(
            f"SELECT MAX(checkpoint_id) AS m FROM checkpoints WHERE thread_id IN ({', '.join('?' * 5)})",
            sorted(seeded_ids))
        assert marks[0]["m"] < summary.freshness(saver).watermark  # the case a watermark refresh cannot see
        before = _count(saver)
    assert _api_ids(staff_client) == listed
    out = StringIO()
    call_command("refresh_inventory", "--json", stdout=out)  # the count check agrees: no rebuild
    assert (json.loads(out.getvalue())["kind"], json.loads(out.getvalue())["missing"]) == ("incremental", 0)
    with pytest.raises(CommandError, match=r"thread [0-9a-f-]{36} already exists in (SQLite file|Postgres database) "
                                           r".*: use another --seed \(this command never adds checkpoints"):
        call_command(*SEED_7, stdout=StringIO())
    with open_checkpointer(database) as saver:
        assert _count(saver) == before and len(walk(saver)) == 33


@pytest.mark.parametrize("args, bound", [
    (["--threads", "5", "--turns-max", "100000"], "--turns-max must be between 1 and 200; got 100,000"),
    (["--threads", "20000000"], "--threads must be between 1 and 10,000,000; got 20,000,000"),
    (["--threads", "0"], "--threads must be between 1 and 10,000,000; got 0"),
    (["--threads", "5", "--turns-min", "201", "--turns-max", "200"], "--turns-min must be between 1 and 200"),
    (["--threads", "5", "--templates", "1000"], "--templates must be between 1 and 100; got 1,000"),
    (["--threads", "5", "--snapshot-frequency", "0"], "--snapshot-frequency must be between 1 and 10,000; got 0"),
])
def test_seed_threads_bounds_its_arguments(database, args, bound):
    with pytest.raises(CommandError, match=re.escape(bound)):
        call_command("seed_threads", *args, stdout=StringIO())
    assert not database.sqlite_path().exists()  # refused before anything ran


# -- rows written below the watermark: the footer says so, the on-demand refresh rebuilds ----------

@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_below_the_watermark_are_reported_then_found_by_the_on_demand_refresh(
        backend, request, tmp_path, settings, runtime_for, staff_client):
    from dashboard.threads import storage
    from dashboard.threads.tasks import refresh_summary
    from deerflow.seed import SeedPlan, seed_threads

    database = request.getfixturevalue(f"{backend}_fixture_db_rw")
    settings.DEER_FLOW_CONFIG_PATH = str(write_config(tmp_path / "config.yaml", database, "delta", 10))
    rt = runtime_for(database, "delta")
    staff_client.get("/threads/")  # builds the summary
    write_thread(database, "newest", mode="delta")  # the watermark moves to now, past every id seeded next
    html = staff_client.get("/threads/").content.decode()
    assert 'data-thread-id="newest"' in html
    assert "complete up to" in html and "misses" not in html
    # A load that leaves the summary alone (like a restore or a backfill): old ids, below the watermark.
    report = seed_threads(database, SeedPlan(threads=3, turns_min=1, turns_max=2, mode="delta", seed="below",
                                             templates=1), summarize=False)
    hidden = {s.thread_id for s in report.samples}
    assert not hidden & _api_ids(staff_client)
    periodic = refresh_summary.apply().get()  # the beat: checks, records, does not rebuild
    assert (periodic["kind"], periodic["missing"]) == ("incremental", report.checkpoints)
    assert refresh_summary.apply().get()["missing"] is None  # checked at most every VERIFY_EVERY_S
    fresh = storage.freshness(rt)
    assert fresh.missing == report.checkpoints and not fresh.complete
    html = staff_client.get("/threads/").content.decode()
    footer = parse(html).find("span", cls="summary-missing")
    assert footer.attrs["data-missing"] == str(report.checkpoints)
    assert f"misses {plural(report.checkpoints, 'checkpoint')} written below its watermark" in footer.text
    assert "Refresh rebuilds it" in footer.text and "complete up to" not in html
    response = staff_client.post("/threads/", HTTP_HX_REQUEST="true")  # the Refresh button
    html = response.content.decode()
    assert re.search(rf"Summary refreshed: full, 31 threads recomputed in [\d.]+ s \(it missed "
                     rf"{plural(report.checkpoints, 'checkpoint')}", html), html[-800:]
    assert "complete up to" in html and "summary-missing" not in html
    assert hidden <= _api_ids(staff_client) and len(_api_ids(staff_client)) == 31
    assert storage.freshness(rt).missing == 0
    # The command is the same on-demand path.
    more = seed_threads(database, SeedPlan(threads=2, turns_min=1, turns_max=2, mode="full", seed="below-2",
                                           templates=1), summarize=False)
    out = StringIO()
    call_command("refresh_inventory", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert (result["kind"], result["threads"], result["missing"]) == ("full", 33, more.checkpoints)
    assert len(_api_ids(staff_client)) == 33
