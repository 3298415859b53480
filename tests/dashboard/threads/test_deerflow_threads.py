"""The thread list, thread page, thread JSON and audit beside DeerFlow's own tables, on both backends.

DeerFlow's ``threads_meta`` and ``runs`` are created in the same database as the real fixture
(:func:`tests.deerflow_schema.stand_beside_fixture`): titles and owners listed and filtered (HTML and API),
search by title, runs shown with the one in flight, orphans counted; bad ``owner`` values are 400s.
"""

from __future__ import annotations

import re

import pytest

from dashboard.threads.services import seconds_words
from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.backends import BACKENDS
from tests.dashboard.jobs.pages import tags
from tests.deerflow_schema import FIXTURE_META, GONE_THREAD, stand_beside_fixture

pytestmark = pytest.mark.django_db

FIXTURE_THREADS = {t["thread_id"] for t in fixtures_real.load_manifest()["threads"]}
ORPHANS = FIXTURE_THREADS - set(FIXTURE_META)


@pytest.fixture(params=BACKENDS)
def beside(request: pytest.FixtureRequest, runtime_for) -> tuple[DatabaseConfig, dict[str, str]]:
    """A writable fixture copy with DeerFlow's tables and rows, and this process frozen in delta mode on it."""
    database = request.getfixturevalue(f"{request.param}_fixture_db_rw")
    runs = stand_beside_fixture(database)
    runtime_for(database, "delta")
    return database, runs


def _text(html: bytes, tag: str, css_class: str) -> str | None:
    """The raw (still escaped) text of the first ``<tag class="css_class">``."""
    found = re.search(rf'<{tag} class="{css_class}"[^>]*>(.*?)</{tag}>'.encode(), html, re.S)
    return found.group(1).decode() if found else None


def _items(client, **query) -> dict[str, dict]:
    response = client.get("/api/threads", {"limit": 1000, **query})
    assert response.status_code == 200, response.content
    assert response.json()["next_cursor"] is None
    return {t["thread_id"]: t for t in response.json()["threads"]}


def test_the_api_lists_titles_and_owners_and_filters_by_owner_title_and_orphans(beside, staff_client):
    items = _items(staff_client)
    assert set(items) == FIXTURE_THREADS
    short = items["full-short-3t"]
    assert (short["title"], short["owner"], short["deerflow_thread"]) == (
        FIXTURE_META["full-short-3t"]["display_name"], "alice", True)
    assert (items["full-empty"]["title"], items["full-empty"]["owner"]) == (None, "alice")
    assert {(t["title"], t["owner"], t["deerflow_thread"]) for k, t in items.items() if k in ORPHANS} == {
        (None, None, False)}
    assert set(_items(staff_client, owner="alice")) == {"full-short-3t", "full-empty"}
    assert set(_items(staff_client, owner="bob")) == {"delta-f10-fork"}
    assert _items(staff_client, owner="nobody") == {}
    assert set(_items(staff_client, q="SOURDOUGH")) == {"delta-f10-fork"}
    assert set(_items(staff_client, thread_class="orphaned")) == ORPHANS
    assert set(_items(staff_client, thread_class="orphaned", owner="alice")) == set()


@pytest.mark.parametrize("owner, words", [("x" * 65, "at most 64 characters"),
                                          ("a\x01b", "control characters")])
def test_bad_owner_values_are_400_naming_the_field(beside, staff_client, owner, words):
    response = staff_client.get("/api/threads", {"owner": owner})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_parameters" and "owner" in body["detail"] and words in body["detail"]
    page = staff_client.get("/threads/", {"owner": owner})
    assert page.status_code == 400 and b"owner" in page.content


def test_the_list_page_shows_titles_escaped_owners_linked_and_searches_titles(beside, staff_client):
    page = staff_client.get("/threads/", {"q": "kyoto"})
    assert page.status_code == 200
    html = page.content
    assert [r["data-thread-id"] for r in tags(html, "tr") if r.get("data-thread-id")] == ["full-short-3t"]
    assert b"Kyoto itinerary &lt;script&gt;alert(1)&lt;/script&gt;" in html and b"<script>alert(1)" not in html
    assert tags(html, "a", href="?owner=alice")
    assert b"<th>Title</th><th>Owner</th>" in html and b"Thread id or title contains" in html
    owned = staff_client.get("/threads/", {"owner": "alice"}).content
    assert sorted(r["data-thread-id"] for r in tags(owned, "tr") if r.get("data-thread-id")) == [
        "full-empty", "full-short-3t"]
    orphans = staff_client.get("/threads/", {"thread_class": "orphaned", "limit": 1000}).content
    assert {r["data-thread-id"] for r in tags(orphans, "tr") if r.get("data-thread-id")} == ORPHANS
    assert b"embedded <code>DeerFlowClient</code>" in orphans and seconds_words(86_400).encode() in orphans


def test_the_thread_page_shows_title_owner_status_and_runs_with_the_one_in_flight(beside, staff_client):
    _, runs = beside
    html = staff_client.get("/threads/delta-f10-fork/").content
    assert _text(html, "dd", "thread-title") == "Sourdough GUIDE &amp; starter"
    assert _text(html, "dd", "thread-status") == "running"
    assert tags(html, "a", href="/threads/?owner=bob")
    flight = tags(html, "p", id="run-in-flight")
    assert flight and flight[0]["data-run-id"] == runs["pending"]
    assert b"checkpoint_write operation is in flight on this thread" in html
    rows = [r["data-run-id"] for r in tags(html, "tr") if r.get("data-run-id")]
    assert rows == [runs["pending"], runs["done"]]  # in flight first, then newest
    assert b"gpt-&lt;b&gt;4o&lt;/b&gt;" in html and b"gpt-<b>4o" not in html  # untrusted: escaped
    assert b"1200 / 345 / 1545" in html and b"end_turn" in html
    orphan = staff_client.get("/threads/delta-f3-40t/").content
    assert tags(orphan, "p", id="no-deerflow-row") and not tags(orphan, "p", id="run-in-flight")


def test_the_thread_json_carries_title_owner_and_whether_deerflow_has_the_thread(beside, staff_client):
    fork = staff_client.get("/api/threads/delta-f10-fork/state").json()
    assert (fork["title"], fork["owner"], fork["deerflow_thread"]) == ("Sourdough GUIDE & starter", "bob", True)
    orphan = staff_client.get("/api/threads/delta-f3-40t/state").json()
    assert (orphan["title"], orphan["owner"], orphan["deerflow_thread"]) == (None, None, False)


def test_the_audit_counts_orphans_their_bytes_and_rows_without_checkpoints(beside, staff_client):
    items = _items(staff_client, sort="bytes")
    body = staff_client.get("/api/audit").json()
    orphans = body["orphans"]
    assert orphans["min_idle_s"] == 86_400 and orphans["threads"] == len(ORPHANS)
    assert orphans["bytes"]["total"] == sum(items[t]["bytes"]["total"] for t in ORPHANS) > 0
    assert orphans["metadata_without_checkpoints"]["count"] == 1
    assert [r["thread_id"] for r in orphans["metadata_without_checkpoints"]["threads"]] == [GONE_THREAD]
    page = staff_client.get("/audit/").content
    assert _text(page, "strong", "orphan-threads") == str(len(ORPHANS))
    assert tags(page, "tr", data_thread_id=GONE_THREAD)


def test_without_deerflow_tables_the_keys_are_null_and_the_page_has_no_deerflow_columns(
        fixture_backend, runtime_for, staff_client):
    _, database = fixture_backend
    runtime_for(database, "delta")
    items = _items(staff_client)
    assert {(t["title"], t["owner"], t["deerflow_thread"]) for t in items.values()} == {(None, None, None)}
    assert _items(staff_client, owner="alice") == {} and _items(staff_client, thread_class="orphaned") == {}
    state = staff_client.get("/api/threads/full-short-3t/state").json()
    assert (state["title"], state["owner"], state["deerflow_thread"]) == (None, None, None)
    html = staff_client.get("/threads/").content
    assert b"<th>Title</th>" not in html and b"Thread id contains" in html
    assert b'id="deerflow"' not in staff_client.get("/threads/full-short-3t/").content
    assert staff_client.get("/api/audit").json()["orphans"] is None
