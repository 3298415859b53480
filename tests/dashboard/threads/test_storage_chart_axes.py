"""The storage chart's axes, units and snapshot marks (issue 14, item 6): server-side SVG, attributes only."""

from __future__ import annotations

import pytest

from dashboard.threads.charts import MAX_BARS, bytes_chart, human_bytes
from deerflow.inventory import footprint
from deerflow.storage.savers import open_checkpointer
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db


def _snapshot_positions(saver, thread_id: str) -> list[int]:
    """Positions whose stored ``messages`` value is LangGraph's ``_DeltaSnapshot`` (deserialized: the truth)."""
    out = []
    for i, c in enumerate(footprint.checkpoint_bytes(saver, thread_id)):
        tup = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                                "checkpoint_id": c.checkpoint_id}})
        if type((tup.checkpoint.get("channel_values") or {}).get("messages")).__name__ == "_DeltaSnapshot":
            out.append(i)
    return out


@pytest.mark.parametrize("thread_id", ["delta-f10-9t", "delta-f10-fork", "migrated-full20-delta20", "full-short-3t"])
def test_snapshot_flags_match_the_stored_values(sqlite_fixture_db, thread_id):
    with open_checkpointer(sqlite_fixture_db) as saver:
        series = footprint.checkpoint_bytes(saver, thread_id)
        assert [i for i, c in enumerate(series) if c.snapshot] == _snapshot_positions(saver, thread_id)


def test_axes_ticks_and_marks(sqlite_fixture_db):
    with open_checkpointer(sqlite_fixture_db) as saver:
        series = footprint.checkpoint_bytes(saver, "delta-f10-9t")
    chart = bytes_chart(series)
    assert len(series) == 27 < MAX_BARS and len(chart.bars) == 27 and chart.per_bar == 1
    assert [b.snapshot for b in chart.bars].index(True) == 14 and chart.snapshots == 1
    peak = max(c.total for c in series)
    assert [t.label for t in chart.y_ticks] == ["0 B", human_bytes(int(peak / 2)), human_bytes(peak)]
    assert chart.y_ticks[0].pos == chart.base and chart.y_ticks[-1].pos == chart.top  # 0 at the base, peak on top
    assert [t.label for t in chart.x_ticks][:2] == ["1", "6"] and chart.x_ticks[0].pos == chart.left


def test_the_page_draws_axes_and_marks(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    html = staff_client.get("/threads/delta-f10-fork/", {"fragment": "storage"}).content
    svg = parse(html).find("section", id="storage-chart").find("svg", cls="chart")
    assert [t.text for t in svg.find("g", cls="y-axis").find_all("text")][0] == "0 B"
    assert [t.text for t in svg.find("g", cls="x-axis").find_all("text")][0] == "1"
    assert len(svg.find_all("rect", cls="snapshot-mark")) == 2  # the fork thread's two snapshots
    assert "preserveAspectRatio" not in svg.attrs  # text is not stretched
    assert b"holds a delta snapshot (2 snapshots)" in html
