"""Issue 14, item 7: result counts, thousands separators, one time format with a UTC tooltip, the favicon,
Backups in the nav with the active item marked, full-page fallbacks for fragment URLs, and the API token page."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from dashboard.accounts.models import ApiToken
from tests.dashboard import oracle
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db


def test_thread_list_says_how_many_threads_match(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    doc = parse(staff_client.get("/threads/").content)
    total = len(oracle.threads())
    assert doc.find("p", id="thread-count").text.startswith(f"{total} threads; showing {total} on this page")
    deltas = sum(oracle.expected_mode(t["thread_id"])[0] == "delta" for t in oracle.threads())
    doc = parse(staff_client.get("/threads/", {"mode": "delta", "limit": "5"}).content)
    assert doc.find("p", id="thread-count").text == f"{deltas} threads match the filters; showing 5 on this page."
    doc = parse(staff_client.get("/threads/", {"q": "no-such-thread-x"}).content)
    assert doc.find("p", id="thread-count").text == "0 threads match the filters."


def test_numbers_have_thousands_separators_and_times_one_format(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    doc = parse(staff_client.get("/threads/").content)
    row = doc.find("tr", data_thread_id="delta-f100-150t")
    assert row.find("td", cls="checkpoints").text == "1,200"
    time = row.find("time")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", time.text)
    assert time.attrs["datetime"].endswith("+00:00") and "UTC" in time.attrs["title"]
    page = parse(staff_client.get("/threads/delta-f100-150t/").content)
    assert "1,200 checkpoints" in page.find("p", cls="summary").text
    assert page.find("p", cls="summary").find("time").text == time.text


def test_favicon_and_active_nav_item(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    for url, active in (("/threads/", "Threads"), ("/threads/full-short-3t/", "Threads"),
                        ("/history/full-short-3t/", "Threads"), ("/jobs/", "Jobs"), ("/jobs/backups/", "Backups"),
                        ("/accounts/tokens/", "API tokens")):
        doc = parse(staff_client.get(url).content)
        nav = doc.find("header").find("nav")
        assert [a.text for a in nav.find_all("a")] == ["Threads", "Jobs", "Backups", "Fleet audit", "API tokens"]
        assert [a.text for a in nav.find_all("a", aria_current="page")] == [active], url
        icon = doc.find("link", rel="icon")
        assert icon.attrs["href"] == "/static/dashboard/favicon.svg"
    assert finders.find("dashboard/favicon.svg")


def test_fragment_urls_opened_on_their_own_are_full_pages(sqlite_fixture_db, runtime_for, staff_client, monkeypatch):
    runtime_for(sqlite_fixture_db, "delta")
    from dashboard.jobs import views
    from dashboard.jobs.workers import WorkerCheck

    monkeypatch.setattr(views, "recent_worker_check",
                        lambda _age: WorkerCheck("none", detail="No live worker can run this job.", hint="Start one."))
    full = staff_client.get("/jobs/workers").content.decode()
    assert "<html" in full and 'id="workers"' in full and "No live worker" in full
    fragment = staff_client.get("/jobs/workers", headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in fragment and 'id="workers"' in fragment


def test_token_page_creates_shows_once_and_revokes(sqlite_fixture_db, runtime_for, staff_client, staff_user):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.post("/accounts/tokens/create", {"name": "nightly <export>"})
    assert response.status_code == 302 and response["Location"] == "/accounts/tokens/"
    html = staff_client.get("/accounts/tokens/").content.decode()
    raw = parse(html).find("pre", id="new-token-value").text
    assert raw.startswith("dfa_") and "nightly &lt;export&gt;" in html
    again = parse(staff_client.get("/accounts/tokens/").content)
    assert not again.find_all("pre", id="new-token-value")  # shown once
    (token,) = ApiToken.objects.filter(user=staff_user)
    row = again.find("tr", data_token_id=str(token.pk))
    assert token.prefix in row.text and "active" in row.text and raw not in again.text
    api = Client().get("/api/threads", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.status_code == 200
    assert staff_client.post("/accounts/tokens/revoke", {"token_id": str(token.pk)}).status_code == 302
    assert Client().get("/api/threads", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    row = parse(staff_client.get("/accounts/tokens/").content).find("tr", data_token_id=str(token.pk))
    assert "revoked" in row.text and not row.find_all("button")


def test_a_token_label_with_a_direction_override_shows_it_as_an_escape(sqlite_fixture_db, runtime_for,
                                                                       staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    staff_client.post("/accounts/tokens/create", {"name": "nightly export \u202e evil"})
    html = staff_client.get("/accounts/tokens/").content.decode()
    assert "\u202e" not in html and html.count("nightly export \\u202e evil") == 2  # heading and row


def test_tokens_are_own_unless_superuser(sqlite_fixture_db, runtime_for, staff_client, staff_user,
                                         django_user_model):
    runtime_for(sqlite_fixture_db, "delta")
    other = django_user_model.objects.create_user("other-staff", password="x", is_staff=True)
    theirs, _ = ApiToken.issue(other, "theirs")
    mine, _ = ApiToken.issue(staff_user, "mine")
    doc = parse(staff_client.get("/accounts/tokens/").content)
    assert [tr.attrs["data-token-id"] for tr in doc.find_all("tr") if "data-token-id" in tr.attrs] == [str(mine.pk)]
    response = staff_client.post("/accounts/tokens/revoke", {"token_id": str(theirs.pk)})
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
    boss = django_user_model.objects.create_superuser("boss", password="x")
    client = Client()
    client.force_login(boss)
    doc = parse(client.get("/accounts/tokens/").content)
    assert {tr.attrs["data-token-id"] for tr in doc.find_all("tr") if "data-token-id" in tr.attrs} == {
        str(mine.pk), str(theirs.pk)}
    assert client.post("/accounts/tokens/revoke", {"token_id": str(theirs.pk)}).status_code == 302
    theirs.refresh_from_db()
    assert theirs.revoked_at is not None


@pytest.mark.parametrize("method, url, data, status", [
    ("post", "/accounts/tokens/revoke", {"token_id": "abc"}, 400),
    ("post", "/accounts/tokens/revoke", {}, 400),
    ("post", "/accounts/tokens/create", {"name": "x" * 101}, 400),
    ("get", "/accounts/tokens/create", None, 405),
])
def test_token_page_bad_input(sqlite_fixture_db, runtime_for, staff_client, method, url, data, status):
    runtime_for(sqlite_fixture_db, "delta")
    response = getattr(staff_client, method)(url, data)
    assert response.status_code == status
    assert parse(response.content).find("p", id="error-detail").text


def test_token_page_needs_staff(outsider_user):
    client = Client()
    assert client.get("/accounts/tokens/").status_code == 302
    client.force_login(outsider_user)
    assert client.get("/accounts/tokens/").status_code == 302
    assert client.post("/accounts/tokens/create", {"name": "x"}).status_code == 302
    assert not ApiToken.objects.exists()


def test_full_mode_list_marks_exactly_the_rows_it_refuses(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "full")
    doc = parse(staff_client.get("/threads/", {"limit": "1000"}).content)
    marked = {tr.attrs["data-thread-id"]: "refused" in tr.classes
              for tr in doc.find("table", id="thread-table").find_all("tr") if "data-thread-id" in tr.attrs}
    assert len(marked) == len(oracle.threads())
    refused = {tid: staff_client.get(f"/threads/{tid}/").status_code == 409 for tid in marked}
    assert marked == refused
    assert any(refused.values()) and not all(refused.values())
    assert "refused in full mode" in doc.find("details", id="class-glossary").text


def test_delta_mode_list_marks_nothing_and_classes_are_words(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    doc = parse(staff_client.get("/threads/").content)
    assert not doc.find_all("tr", cls="refused")
    api = {t["thread_id"]: t["thread_class"]
           for t in staff_client.get("/api/threads", {"limit": 1000}).json()["threads"]}
    words = {"full": "full", "delta": "delta", "delta_counters_only": "delta, counters only",
             "migrated": "migrated full → delta", "inconsistent": "inconsistent"}
    for tr in doc.find("table", id="thread-table").find_all("tr"):
        if "data-thread-id" in tr.attrs:
            label = tr.find("span", cls="class")
            assert label.attrs["data-class"] == api[tr.attrs["data-thread-id"]]
            assert label.text == words[label.attrs["data-class"]] and label.attrs["title"]
    label = doc.find("tr", data_thread_id="markerless-delta-f10-13t").find("span", cls="class")
    assert label.text == "inconsistent" and "marker-less delta thread whose head is a snapshot" in label.attrs["title"]
    glossary = doc.find("details", id="class-glossary").text
    assert "inconsistent" in glossary and "full-mode write onto a delta thread" in glossary


def test_thread_header_does_not_repeat_the_mode(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    summary = parse(staff_client.get("/threads/full-short-3t/").content).find("p", cls="summary")
    assert not summary.find_all("span", cls="class")  # not "full full"
    assert not summary.text.startswith("full full")
    summary = parse(staff_client.get("/threads/migrated-full20-delta20/").content).find("p", cls="summary")
    assert summary.find("span", cls="class").text == "migrated full → delta"
