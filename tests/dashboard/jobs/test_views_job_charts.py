"""A job's pictures (issue 14, item 6): threads finished over time on every job page, and on a finished dry
run the growth (conversion) or shrink (compaction) factor per thread; server-side SVG, labels escaped."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.jobs import charts
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.services import JobOptions, create_job
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

THREADS = ["delta-f10-1t", "delta-f10-9t", "delta-f10-10t", "delta-f10-fork", "full-short-3t"]
USABLE = charts.WIDTH - charts.LABEL - charts.VALUE


def _growth_bars(doc) -> list[tuple[str, float, str, bool]]:
    out = []
    for g in doc.find("svg", id="growth-chart").find_all("g", cls="bar"):
        _label, value = (t.text for t in g.find_all("text"))
        out.append((g.attrs["data-thread-id"], float(g.find("rect").attrs["width"]), value, "outlier" in g.classes))
    return out


def test_a_finished_dry_run_draws_its_throughput_and_growth(finished_job, staff_client):
    dry = finished_job("dry_run", {"thread_ids": THREADS})
    convertible = list(dry.results.filter(status="needs_conversion"))
    ran = dry.results.exclude(status__in=(*ThreadResult.OPEN, ThreadResult.SKIPPED)).count()
    assert len(convertible) == 4 and ran == 5
    html = staff_client.get(f"/jobs/{dry.pk}/").content
    doc = parse(html)
    # Growth: one bar per thread it would convert, heaviest after first, width proportional to the factor.
    bars = _growth_bars(doc)
    expected = sorted(convertible, key=lambda r: (-r.bytes_after, r.thread_id))
    assert [b[0] for b in bars] == [r.thread_id for r in expected]
    factors = {r.thread_id: r.bytes_after / r.bytes_before for r in convertible}
    peak = max(factors.values())
    for tid, width, value, _outlier in bars:
        assert width == pytest.approx(USABLE * factors[tid] / peak, abs=0.01)
        assert value.startswith(f"× {factors[tid]:.2f} (")
    assert max(b[1] for b in bars) == USABLE
    ticks = doc.find("svg", id="growth-chart").find_all("text", cls="x-tick")
    positions = [float(t.attrs["x"]) for t in ticks]
    assert all(b - a >= charts.TICK_GAP for a, b in zip(positions, positions[1:], strict=False))  # none overlaps
    expected_ticks = ["× 0", f"× {round(peak, 2):g}"]
    if USABLE / peak >= charts.TICK_GAP and USABLE - USABLE / peak >= charts.TICK_GAP:
        expected_ticks.insert(1, "× 1")
    assert [t.text for t in ticks] == expected_ticks
    assert "4 heaviest threads after conversion" in doc.find("p", id="growth-caption").text
    # Throughput: every thread that ran is counted once; the axes say threads and time.
    svg = doc.find("svg", id="throughput-chart")
    counts = [int(r.attrs["data-count"]) for r in svg.find_all("rect", cls="bar")]
    assert sum(counts) == ran
    assert [t.text for t in svg.find_all("text", cls="y-tick")][-1] == f"{max(counts):,}"
    assert svg.find_all("text", cls="x-tick")[0].text == "0 s"
    assert svg.find("text", cls="x-title").text == "time since the job started"
    assert f"({ran} finished;" in doc.find("p", id="throughput-caption").text
    # The y axis's title sits above the plot, clear of its top tick (baselines a 13-unit line apart).
    title_y = float(svg.find("text", cls="y-title").attrs["y"])
    assert title_y + 13 <= min(float(t.attrs["y"]) + float(t.attrs["dy"]) for t in svg.find_all("text", cls="y-tick"))
    assert b"style=" not in html.split(b'id="throughput-chart"')[1].split(b"</svg>")[0]
    assert b"<script" not in html.split(b'id="growth"')[1].split(b"</section>")[0]


def test_growth_labels_never_overlap():
    """× 1 sits next to × 0 when the peak factor is large: its label is left out, the dashed line stays."""
    usable = USABLE
    assert [t.label for t in charts._spaced_ticks(usable, 40.0)] == ["× 0", "× 40"]
    assert [t.label for t in charts._spaced_ticks(usable, 3.0)] == ["× 0", "× 1", "× 3"]
    assert [t.label for t in charts._spaced_ticks(usable, 1.0)] == ["× 0", "× 1"]
    assert [t.label for t in charts._spaced_ticks(usable, 1.05)] == ["× 0", "× 1.05"]


def test_a_compaction_dry_run_draws_the_shrink(finished_job, staff_client):
    dry = finished_job("compact_dry_run", {"thread_ids": ["full-short-3t", "full-rollback"]})
    rows = list(dry.results.filter(status="needs_compaction"))
    assert rows and all(r.bytes_after < r.bytes_before for r in rows)
    doc = parse(staff_client.get(f"/jobs/{dry.pk}/").content)
    assert doc.find("section", id="growth").find("h2").text == "Shrink per thread"
    bars = _growth_bars(doc)
    assert sorted(b[0] for b in bars) == sorted(r.thread_id for r in rows)
    # Every factor is under 1: the bars end left of the dashed "× 1" line, which sits at the plot's right end.
    one = float(doc.find("line", cls="factor-one").attrs["x1"])
    assert one == charts.LABEL + USABLE
    for tid, width, _v, _o in bars:
        r = next(r for r in rows if r.thread_id == tid)
        assert width == pytest.approx(USABLE * r.bytes_after / r.bytes_before, abs=0.01) and width < USABLE


def _job_with_rows(kind: str, rows: list[tuple[str, int, int, dt.datetime | None, str]]) -> ConversionJob:
    start = rows[0][3] if rows[0][3] else timezone.now()
    job = ConversionJob.objects.create(kind=kind, state=ConversionJob.State.SUCCEEDED, launched_by="test",
                                       started_at=start, finished_at=max(r[3] for r in rows if r[3]))
    ThreadResult.objects.bulk_create([ThreadResult(job=job, thread_id=t, bytes_before=b, bytes_after=a,
                                                   finished_at=f, status=s) for t, b, a, f, s in rows])
    return job


def test_a_hostile_thread_id_is_escaped_in_the_chart(staff_client):
    t0 = timezone.now() - dt.timedelta(minutes=5)
    hostile = '<img src=x onerror=alert(1)>"&'
    job = _job_with_rows("dry_run", [(hostile, 100, 2000, t0, "needs_conversion"),
                                     ("plain-a", 100, 200, t0 + dt.timedelta(seconds=30), "needs_conversion"),
                                     ("plain-b", 100, 210, t0 + dt.timedelta(seconds=90), "needs_conversion")])
    html = staff_client.get(f"/jobs/{job.pk}/").content
    assert b"<img src=x" not in html
    chart = html.split(b'id="growth-chart"')[1].split(b"</svg>")[0]
    assert b"&lt;img src=x onerror=alert(1)&gt;&quot;&amp;" in chart
    bars = _growth_bars(parse(html))
    assert bars[0][0] == hostile and bars[0][3]  # the heaviest, and an outlier (× 20 against a median of × 2.1)
    assert [b[3] for b in bars[1:]] == [False, False]


def test_twenty_threads_are_drawn_and_the_rest_counted(staff_client):
    t0 = timezone.now() - dt.timedelta(minutes=10)
    job = _job_with_rows("dry_run", [
        (f"t{i:02}", 100, 100 + 10 * i, t0 + dt.timedelta(seconds=20 * i), "needs_conversion") for i in range(25)])
    doc = parse(staff_client.get(f"/jobs/{job.pk}/").content)
    bars = _growth_bars(doc)
    assert [b[0] for b in bars] == [f"t{i:02}" for i in range(24, 4, -1)]
    assert "; 5 more not drawn" in doc.find("p", id="growth-caption").text
    # Throughput: 25 finishes over 480 s, 10 s intervals (480 s / 60 bars rounds up to 10 s): one thread every 2nd bar.
    svg = doc.find("svg", id="throughput-chart")
    counts = [int(r.attrs["data-count"]) for r in svg.find_all("rect", cls="bar")]
    assert len(counts) == 49 and counts[::2] == [1] * 25 and set(counts[1::2]) == {0}
    assert "Threads finished per 10 s" in doc.find("p", id="throughput-caption").text


def test_a_job_with_no_finished_rows_shows_a_sentence(delta_rt, staff_client):
    job = create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]}, JobOptions(launched_by="test"))
    doc = parse(staff_client.get(f"/jobs/{job.pk}/").content)
    assert doc.find_all("svg", id="throughput-chart") == []
    assert doc.find("p", id="throughput-none").text.startswith("No thread has finished yet")
    assert doc.find_all("section", id="growth") == []  # not a finished dry run


def test_finish_times_leave_out_open_and_skipped_rows():
    t0 = timezone.now() - dt.timedelta(minutes=5)
    job = _job_with_rows("convert", [("a", 1, 1, t0, "converted"), ("b", 1, 1, t0 + dt.timedelta(seconds=5), "error"),
                                     ("c", 1, 1, t0, "skipped"), ("d", 1, 1, None, "queued")])
    assert sorted(charts.finish_times(job)) == [t0, t0 + dt.timedelta(seconds=5)]


def test_throughput_intervals_and_bar_heights():
    t0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    times = [t0 + dt.timedelta(minutes=m) for m in (125, 0, 0, 0, 30, 61)]
    chart = charts.throughput_chart(times, t0, t0 + dt.timedelta(minutes=130))
    assert (chart.interval_s, chart.interval, chart.finished, chart.peak) == (300, "5 min", 6, 3)
    counts = [b.count for b in chart.bars]
    assert len(counts) == 27 and counts[0] == 3 and counts[6] == 1 and counts[12] == 1 and counts[25] == 1
    usable = chart.base - chart.top
    assert chart.bars[0].height == usable and chart.bars[6].height == pytest.approx(usable / 3, abs=0.01)
    assert [t.label for t in chart.y_ticks] == ["0", "1", "3"]
    assert chart.x_ticks[1].label == "25 min"
    assert charts.throughput_chart([], t0) is None
    assert [charts.interval_words(s) for s in (1, 10, 60, 300, 3600, 7200, 86400)] == [
        "second", "10 s", "minute", "5 min", "hour", "2 h", "day"]


def test_a_long_thread_id_is_shortened_in_the_middle_and_whole_in_its_tooltip(staff_client):
    """Labels keep both ends of a long id in the label column (a 24-cell monospace line ends before the
    bars); the bar's tooltip and data attribute hold the whole id, escaped."""
    t0 = timezone.now() - dt.timedelta(minutes=5)
    head, tail = "deerflow-run-2026-12-05-", "-worker-7<b>&-0042"
    long_id = head + "x" * 40 + tail
    twin = head + "x" * 40 + "-worker-7<b>&-0043"
    job = _job_with_rows("dry_run", [(long_id, 100, 300, t0, "needs_conversion"),
                                     (twin, 100, 200, t0 + dt.timedelta(seconds=30), "needs_conversion"),
                                     ("short", 100, 150, t0 + dt.timedelta(seconds=60), "needs_conversion")])
    html = staff_client.get(f"/jobs/{job.pk}/").content
    assert b"<b>" not in html and b"-worker-7&lt;b&gt;&amp;-0042" in html
    groups = parse(html).find("svg", id="growth-chart").find_all("g", cls="bar")
    labels = [g.find("text", cls="label") for g in groups]
    assert [lab.text for lab in labels] == ["deerflow-run…-7<b>&-0042", "deerflow-run…-7<b>&-0043", "short"]
    assert {lab.attrs["font-family"] for lab in labels} == {"monospace"}
    cell = 0.6 * int(labels[0].attrs["font-size"])
    assert charts.LABEL_CELLS * cell <= float(labels[0].attrs["x"])  # the longest label starts inside the svg
    assert [g.attrs["data-thread-id"] for g in groups] == [long_id, twin, "short"]
    assert groups[0].find("title").text.startswith(f"{long_id}: × 3.00")


def test_a_hidden_character_is_shown_in_the_label_and_the_tooltip(staff_client):
    t0 = timezone.now() - dt.timedelta(minutes=5)
    job = _job_with_rows("dry_run", [("evil\u202etxt.exe", 100, 300, t0, "needs_conversion")])
    group = parse(staff_client.get(f"/jobs/{job.pk}/").content).find("svg", id="growth-chart").find("g", cls="bar")
    assert group.find("text", cls="label").text == "evil\\u202etxt.exe"
    assert group.find("title").text.startswith("evil\\u202etxt.exe: ")
