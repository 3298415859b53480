"""Sorting, storage and the summary on the pages and the API (``/threads/``, ``/api/threads``, thread page, audit)."""

from __future__ import annotations

import re

import pytest

from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

ITEM_KEYS = {"thread_id", "mode", "mode_evidence", "thread_class", "checkpoint_count", "updated_at", "title", "owner",
             "deerflow_thread"}


def _walk_api(client, **query) -> list[dict]:
    out, cursor = [], None
    while True:
        body = client.get("/api/threads", {**query, **({"cursor": cursor} if cursor else {})}).json()
        out += body["threads"]
        cursor = body["next_cursor"]
        if cursor is None:
            return out


def test_sort_bytes_lists_heaviest_first_with_storage_and_replay_depth(sqlite_fixture_db_rw, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db_rw, "delta")
    items = _walk_api(staff_client, sort="bytes", limit=4)
    assert len(items) == 27
    assert all(set(i) == ITEM_KEYS | {"bytes", "replay_depth"} for i in items)
    totals = [i["bytes"]["total"] for i in items]
    assert totals == sorted(totals, reverse=True)
    assert all(i["bytes"]["total"] == i["bytes"]["checkpoints"] + i["bytes"]["blobs"] + i["bytes"]["writes"]
               for i in items)
    by_id = {i["thread_id"]: i for i in items}
    assert by_id["full-tools-30t"]["replay_depth"] is None and by_id["delta-f10-10t"]["replay_depth"] == 0
    plain = staff_client.get("/api/threads", {"limit": 1000}).json()["threads"]
    assert all(set(i) == ITEM_KEYS for i in plain)  # the stable contract without sort=


def test_sort_checkpoints_and_updated(sqlite_fixture_db_rw, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db_rw, "delta")
    counts = [i["checkpoint_count"] for i in _walk_api(staff_client, sort="checkpoints", limit=5)]
    assert counts == sorted(counts, reverse=True) and counts[0] == 1200
    updated = [i["thread_id"] for i in _walk_api(staff_client, sort="updated", limit=5)]
    assert updated == [i["thread_id"] for i in staff_client.get("/api/threads", {"limit": 1000}).json()["threads"]]


@pytest.mark.parametrize("query", [{"sort": "size"}, {"sort": "-bytes"}, {"sort": "bytes", "cursor": "garbage"}])
def test_bad_sort_or_cursor_answers_400(sqlite_fixture_db, runtime_for, staff_client, query):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get("/api/threads", query)
    assert response.status_code == 400
    body = response.json()
    assert body["hint"] and ("sort" in body["detail"] or body["code"] == "invalid_cursor")


def test_a_cursor_of_another_sort_answers_400(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    cursor = staff_client.get("/api/threads", {"sort": "bytes", "limit": 2}).json()["next_cursor"]
    response = staff_client.get("/api/threads", {"sort": "checkpoints", "cursor": cursor})
    assert response.status_code == 400 and response.json()["code"] == "invalid_cursor"


def test_list_page_shows_size_replay_and_the_summary_status(sqlite_fixture_db_rw, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db_rw, "delta")
    html = staff_client.get("/threads/", {"sort": "bytes"}).content.decode()
    doc = parse(html)
    cells = [tr.find_all("td") for tr in doc.find_all("tr") if tr.attrs.get("data-thread-id")]
    sizes = [int(c[5].attrs["data-bytes"]) for c in cells]
    assert sizes == sorted(sizes, reverse=True) and len(cells) == 27
    assert "Listed from the thread summary" in html and 'name="sort"' in html
    assert "Heaviest threads" in html


def test_refresh_button_refreshes_and_answers_the_rows(sqlite_fixture_db_rw, runtime_for, staff_client):
    from tests.dashboard.writes import write_thread

    runtime_for(sqlite_fixture_db_rw, "delta")
    staff_client.get("/threads/")
    write_thread(sqlite_fixture_db_rw, "after-refresh", mode="delta")
    response = staff_client.post("/threads/?sort=updated", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert re.search(r"Summary refreshed: incremental, \d+ threads?", html) and "<html" not in html
    assert 'data-thread-id="after-refresh"' in html
    redirect = staff_client.post("/threads/?mode=delta")
    assert redirect.status_code == 302 and redirect["Location"] == "/threads/?mode=delta"


def test_thread_page_has_a_storage_chart_drawn_with_attributes_only(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    html = staff_client.get("/threads/delta-f10-200t/").content.decode()
    assert 'hx-get="/threads/delta-f10-200t/?fragment=storage' in html  # loaded after the page
    chart = staff_client.get("/threads/delta-f10-200t/", {"fragment": "storage"},
                             HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in chart
    # Opened on its own (no htmx), the same URL is a whole page around the same chart.
    assert "<html" in staff_client.get("/threads/delta-f10-200t/", {"fragment": "storage"}).content.decode()
    chart = chart[chart.index('id="storage-chart"'):]
    chart = chart[:chart.index("</section>")]
    marks = chart.count('class="snapshot-mark"')
    assert marks > 0  # a delta thread: its snapshots are marked (and get a legend entry)
    # 752 checkpoints: 108 bars of 7, 3 stacked parts; 3 legend entries; one mark per bar holding a snapshot
    assert "<svg" in chart and chart.count("<rect") == 108 * 3 + 3 + marks + 1
    assert "style=" not in chart and "<script" not in chart and "<style" not in chart
    assert re.search(r"each bar is the mean of \d+ consecutive checkpoints", chart)
    assert "replay depth 2" in html and "stored (checkpoints" in html


def test_audit_page_shows_storage_per_mode(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    html = staff_client.get("/audit/").content.decode()
    table = parse(html).find("table", id="storage-by-mode")
    modes = {tr.attrs["data-mode"]: [td.text for td in tr.find_all("td")] for tr in table.find_all("tr")
             if tr.attrs.get("data-mode")}
    assert modes["full"][1] == "8" and modes["delta"][1] == "19"


def test_thread_page_row_follows_a_conversion_of_the_same_head(sqlite_fixture_db_rw, runtime_for):
    from dashboard.threads import services
    from deerflow.convert import convert_thread

    rt = runtime_for(sqlite_fixture_db_rw, "delta")
    head = services.read_state(rt, "delta-f10-9t")
    before = services.thread_summary(rt, "delta-f10-9t", head=head)
    assert services.thread_summary(rt, "delta-f10-9t", head=head) is before  # answered from memory
    assert before.mode == "delta" and before.replay_depth is not None
    assert convert_thread(sqlite_fixture_db_rw, "delta-f10-9t").status == "converted"  # same ids, new metadata
    head = services.read_state(rt, "delta-f10-9t")
    after = services.thread_summary(rt, "delta-f10-9t", head=head)
    assert (after.mode, after.thread_class, after.replay_depth) == ("full", "full", None)
    assert after.checkpoint_count == before.checkpoint_count and after.bytes_total > before.bytes_total
