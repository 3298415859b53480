"""The audit page's census and storage-per-mode bar charts (issue 14, item 6): server-side SVG, one bar per
class / mode, scaled to the largest, labelled with the value; no inline style or script."""

from __future__ import annotations

import datetime as dt

import pytest

from dashboard.fleet.charts import LABEL, WIDTH, census_chart
from dashboard.threads.charts import human_bytes
from deerflow import inventory
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db


def _bars(svg) -> list[tuple[str, float, str]]:
    out = []
    for g in svg.find_all("g", cls="bar"):
        label, value = (t.text for t in g.find_all("text"))
        out.append((label, float(g.find("rect").attrs["width"]), value))
    return out


def test_census_and_storage_charts_on_the_audit_page(runtime_for, sqlite_fixture_db, staff_client):
    rt = runtime_for(sqlite_fixture_db, "delta")
    census = inventory.class_counts(rt.saver)
    storage = inventory.storage_by_mode(rt.saver)
    html = staff_client.get("/audit/").content
    doc = parse(html)
    bars = _bars(doc.find("svg", id="census-chart"))
    assert [b[0] for b in bars] == ["full", "delta", "delta, counters only", "migrated full → delta", "inconsistent"]
    assert [b[2] for b in bars] == [f"{n:,} thread{'s' if n != 1 else ''}" for n in census.values()]
    peak = max(census.values())
    widest = [b for b, n in zip(bars, census.values(), strict=True) if n == peak][0]
    assert widest[1] == WIDTH - LABEL - 90
    for (_label, width, _v), n in zip(bars, census.values(), strict=True):
        assert width == pytest.approx(widest[1] * n / peak, abs=0.01)
    modes = _bars(doc.find("svg", id="storage-by-mode-chart"))
    assert modes == [(f"{m} ({t['threads']:,} threads)", pytest.approx(modes[i][1]), human_bytes(t["bytes_total"]))
                     for i, (m, t) in enumerate(storage.items())]
    assert b"style=" not in html.split(b'id="census-chart"')[1].split(b"</svg>")[0]
    # The htmx refresh carries the same charts.
    assert b'id="census-chart"' in staff_client.get("/audit/", HTTP_HX_REQUEST="true").content


def test_an_empty_census_draws_zero_width_bars():
    chart = census_chart({"full": 0, "delta": 0})
    assert [b.width for b in chart.bars] == [0, 0] and [b.value for b in chart.bars] == ["0 threads", "0 threads"]


def test_the_writers_section_says_which_summary_refresh_it_counts(runtime_for, tmp_path, staff_client):
    from deerflow.config.database_config import DatabaseConfig
    from deerflow.inventory import summary
    from tests.dashboard.fleet.writes import write_turns

    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "writers"))
    write_turns(database, "steady", 3, snapshot_frequency=4)
    rt = runtime_for(database, "delta", 4)
    doc = parse(staff_client.get("/audit/").content)
    refreshed_at = summary.freshness(rt.saver).refreshed_at
    note = doc.find("p", id="writers-as-of")
    assert note is not None
    assert note.find("time").attrs["datetime"] == dt.datetime.fromisoformat(refreshed_at).isoformat()
    writers = staff_client.get("/api/audit").json()["writers"]
    assert set(writers) == {"since_checkpoint_id", "checkpoints", "delta_marked", "counters_only", "plain",
                            "threads", "cadences", "last_write_at", "window_hours"}
    assert writers["threads"] == 1 and writers["cadences"] == {"4": 1}
