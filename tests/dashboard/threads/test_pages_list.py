"""``/threads/``: every thread with mode flag, evidence, class, counts; htmx fragments; paging; filters."""

from __future__ import annotations

import json
from urllib.parse import urljoin

import pytest

from tests.dashboard import oracle
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

EVIDENCE_LABELS = {"deerflow_marker": "DeerFlow marker", "langgraph_counters": "LangGraph counters only", None: ""}


def rows(html) -> dict[str, dict]:
    """Thread rows of the list table, by thread id."""
    out = {}
    for tr in parse(html).find_all("tr"):
        tid = tr.attrs.get("data-thread-id")
        if tid is None:
            continue
        cells = tr.find_all("td")
        mode_badge = cells[1].find("span", cls="badge")
        evidence = cells[1].find_all("span", cls="evidence")
        out[tid] = {
            "href": cells[0].find("a").attrs["href"],
            "link_text": cells[0].text,
            "mode": mode_badge.text,
            "mode_class": mode_badge.classes,
            "evidence": evidence[0].text if evidence else "",
            "thread_class": cells[2].find("span", cls="class").attrs["data-class"],
            "checkpoint_count": int(cells[3].text.replace(",", "")),
            "updated": cells[4].text,
        }
    return out


def test_list_page_shows_every_thread_with_flags(fixture_backend, runtime_for, staff_client):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    response = staff_client.get("/threads/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    listed = rows(response.content)
    assert set(listed) == {t["thread_id"] for t in oracle.threads()}
    api = {t["thread_id"]: t for t in staff_client.get("/api/threads", {"limit": 1000}).json()["threads"]}
    for tid, row in listed.items():
        mode, evidence = oracle.expected_mode(tid)
        assert row["mode"] == mode and f"mode-{mode}" in row["mode_class"], tid
        assert row["evidence"] == EVIDENCE_LABELS[evidence], tid
        assert row["thread_class"] == api[tid]["thread_class"], tid
        assert row["checkpoint_count"] == oracle.thread(tid)["backends"][backend]["checkpoint_count"], tid
        assert row["link_text"] == tid
        assert row["updated"][:10] == api[tid]["updated_at"][:10]
    assert list(listed) == list(api), "same order as the API"


def test_list_page_shows_the_process_mode(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta", snapshot_frequency=25)
    doc = parse(staff_client.get("/threads/").content)
    process = doc.find("span", cls="process")
    assert "delta" in process.text and "snapshot every 25" in process.text
    runtime_for(sqlite_fixture_db, "full")
    doc = parse(staff_client.get("/threads/").content)
    process = doc.find("span", cls="process")
    assert "full" in process.text and "snapshot" not in process.text


def test_htmx_request_returns_only_the_rows_fragment(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    full_page = staff_client.get("/threads/").content.decode("utf-8")
    fragment = staff_client.get("/threads/", HTTP_HX_REQUEST="true").content.decode("utf-8")
    assert "<html" in full_page and 'class="filters"' in full_page
    assert "<html" not in fragment and "<head" not in fragment and "<body" not in fragment
    assert 'class="filters"' not in fragment
    assert fragment.lstrip().startswith('<p class="count" id="thread-count">')  # the result count, then the rows
    assert '<table class="grid" id="thread-table">' in fragment
    assert rows(fragment) == rows(full_page)


def test_fragment_and_page_are_cached_apart(sqlite_fixture_db, runtime_for, staff_client):
    """Same URL, two bodies: ``Vary: HX-Request``, and htmx's history restore gets the whole page."""
    runtime_for(sqlite_fixture_db, "delta")
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        assert "HX-Request" in staff_client.get("/threads/", **headers)["Vary"]
    restore = staff_client.get("/threads/", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" in restore.content.decode("utf-8")


def test_htmx_errors_are_fragments_that_htmx_swaps(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get("/threads/", {"limit": "0"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    html = response.content.decode("utf-8")
    assert "<html" not in html and "HTTP 400" in html
    # htmx 2 does not swap 4xx/5xx unless told to: the page's htmx-config does.
    config = parse(staff_client.get("/threads/").content).find("meta", name="htmx-config").attrs["content"]
    handling = json.loads(config)["responseHandling"]
    assert {"code": "[45]..", "swap": True, "error": True} in handling
    assert json.loads(config)["allowEval"] is False


@pytest.mark.parametrize("htmx", [False, True])
def test_next_page_links_walk_every_thread_once(sqlite_fixture_db, runtime_for, staff_client, settings, htmx):
    settings.DASHBOARD_PAGE_SIZE = 5
    runtime_for(sqlite_fixture_db, "delta")
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    url = "/threads/?mode=delta"
    seen: list[str] = []
    pages = 0
    while url:
        response = staff_client.get(url, **headers)
        assert response.status_code == 200
        page_rows = rows(response.content)
        assert 0 < len(page_rows) <= 5
        seen.extend(page_rows)
        doc = parse(response.content)
        links = {a.text: a for a in doc.find_all("a") if a.attrs.get("hx-target") == "#thread-rows"}
        if pages:
            assert "« First page" in links
        nxt = links.get("Next page »")
        if nxt is not None:
            assert nxt.attrs["href"] == nxt.attrs["hx-get"]
            assert "mode=delta" in nxt.attrs["href"]
        url = urljoin("http://testserver/threads/", nxt.attrs["href"]) if nxt is not None else None
        pages += 1
        assert pages < 20
    assert sorted(seen) == sorted(oracle.delta_thread_ids())
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize(("query", "expected"), [
    ({"mode": "full"}, lambda: set(oracle.full_thread_ids())),
    ({"mode": "delta"}, lambda: set(oracle.delta_thread_ids())),
    ({"q": "fork"}, lambda: {"delta-f10-fork", "delta-f10-fork-from-input"}),
    ({"q": "%"}, lambda: set()),
    ({"thread_class": "migrated"}, lambda: {"migrated-full20-delta20"}),
    ({"thread_class": "inconsistent"}, lambda: {"markerless-delta-f10-13t"}),
    ({"mode": "full", "q": "empty"}, lambda: {"full-empty", "delta-empty"}),
])
def test_filters(sqlite_fixture_db, runtime_for, staff_client, query, expected):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get("/threads/", query)
    assert set(rows(response.content)) == expected()
    if not expected():
        assert "No threads match." in response.content.decode("utf-8")
    # The filter form keeps the chosen values.
    doc = parse(response.content)
    if "q" in query:
        assert doc.find("input", name="q").attrs["value"] == query["q"]


@pytest.mark.parametrize("query", [{"limit": "0"}, {"mode": "nope"}, {"cursor": "garbage"}])
def test_bad_list_parameters_answer_400_page(sqlite_fixture_db, runtime_for, staff_client, query):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get("/threads/", query)
    assert response.status_code == 400
    html = response.content.decode("utf-8")
    assert "HTTP 400" in html and 'class="hint"' in html


def test_home_redirects_to_the_list(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/threads/"


def test_list_links_open_each_thread_page(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    for tid, row in rows(staff_client.get("/threads/").content).items():
        response = staff_client.get(urljoin("http://testserver/threads/", row["href"]))
        assert response.status_code == 200, tid
        assert parse(response.content).find("h1", cls="thread-id").text == tid
