"""The thread page shows the snapshot cadence inferred from the thread's metadata (issue 5, item 5)."""

import re

import pytest


def _cadence_text(html: str) -> str:
    match = re.search(r'<span class="cadence" id="cadence"[^>]*>(.*?)</span>\s*\n\s*{?', html, re.S)
    assert match, "no cadence on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


@pytest.mark.django_db
@pytest.mark.parametrize("thread_id, expected", [
    ("delta-f3-40t", "written at snapshot cadence 3 (exact)"),
    ("delta-f100-150t", "written at snapshot cadence 100 (exact)"),
    ("markerless-delta-f10-13t", "written at snapshot cadence 10 (exact)"),
    ("delta-f10-1t", "written at snapshot cadence ≥ 3 (no snapshot yet: lower bound)"),
])
def test_thread_page_shows_the_inferred_cadence(sqlite_fixture_db, runtime_for, staff_client, thread_id, expected):
    runtime_for(sqlite_fixture_db, "delta", 10)
    response = staff_client.get(f"/threads/{thread_id}/")
    assert response.status_code == 200
    assert expected in _cadence_text(response.content.decode())


@pytest.mark.django_db
def test_a_cadence_other_than_the_process_is_flagged(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta", 10)
    html = staff_client.get("/threads/delta-f3-40t/").content.decode()
    assert "this process froze 10" in html
    html = staff_client.get("/threads/delta-f10-50t/").content.decode()
    assert "this process froze" not in html


@pytest.mark.django_db
def test_full_threads_show_no_cadence(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta", 10)
    html = staff_client.get("/threads/full-tools-30t/").content.decode()
    assert 'id="cadence"' not in html


@pytest.mark.django_db
def test_a_summary_without_counters_answers_no_cadence_and_one_with_counters_infers_it(sqlite_fixture_db, runtime_for):
    from dashboard.threads import services
    from deerflow.inventory import census

    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    full = services.thread_summary(rt, "full-tools-30t")
    assert full.counters_count == 0
    assert services.thread_cadence(rt, "full-tools-30t", summary=full) is None
    assert services.thread_cadence(rt, "full-tools-30t") is None  # the scan agrees
    delta = services.thread_summary(rt, "delta-f3-40t")
    assert delta.counters_count > 0
    got = services.thread_cadence(rt, "delta-f3-40t", summary=delta)
    scan = census.infer_cadences(rt.saver, use_summary=False)["delta-f3-40t"]
    assert (got.exact, got.lower_bound, got.snapshots) == (scan.exact, scan.lower_bound, scan.snapshots) == (
        [3], None, scan.snapshots)


@pytest.mark.django_db
def test_the_cadence_is_inferred_once_per_row_shown(sqlite_fixture_db, runtime_for):
    """The cadence line sits in the summary row's line: an equal row answers the cadence inferred beside it,
    any other row (a new head, another count) infers it again."""
    import dataclasses

    from dashboard.threads import services, storage

    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    cache = storage.SummaryCache()
    row = services.thread_summary(rt, "delta-f3-40t")
    calls = []

    def compute():
        calls.append(1)
        return services.thread_cadence(rt, "delta-f3-40t", summary=row)

    first = cache.cadence(rt, row, compute)
    assert first.exact == [3] and calls == [1]
    assert cache.cadence(rt, dataclasses.replace(row), compute) is first and calls == [1]
    moved = dataclasses.replace(row, checkpoint_count=row.checkpoint_count - 1)
    assert cache.cadence(rt, moved, compute).exact == [3] and calls == [1, 1]
    assert cache.cadence(rt, row, compute).exact == [3] and calls == [1, 1, 1]
