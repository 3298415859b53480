"""``GET /api/threads``: shape, manifest counts and mode flags, keyset paging, filters, 400s."""

from __future__ import annotations

import base64
import datetime as dt

import pytest

from tests.dashboard import oracle

pytestmark = pytest.mark.django_db

URL = "/api/threads"
ITEM_KEYS = {"thread_id", "mode", "mode_evidence", "thread_class", "checkpoint_count", "updated_at", "title", "owner",
             "deerflow_thread"}


def _all_threads(client, **query) -> list[dict]:
    """Every thread the API lists for ``query``, following ``next_cursor`` (at most 100 pages)."""
    seen: list[dict] = []
    cursor = None
    for _ in range(100):
        params = dict(query, **({"cursor": cursor} if cursor else {}))
        response = client.get(URL, params)
        assert response.status_code == 200, response.content
        body = response.json()
        seen.extend(body["threads"])
        cursor = body["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("pagination did not terminate")


def _expected_class(thread_id: str, backend: str) -> str:
    """The thread class re-derived from the manifest's per-checkpoint facts (inventory docstring rules)."""
    cps = oracle.checkpoints(thread_id, backend)
    marker = sum(1 for c in cps if c["delta_marker"])
    counters = sum(1 for c in cps if c["counters_since_delta_snapshot"])
    if marker == 0 and counters == 0:
        return "full"
    head_id = oracle.thread(thread_id)["backends"][backend]["head_checkpoint_id"]
    head = next(c for c in cps if c["checkpoint_ns"] == "" and c["checkpoint_id"] == head_id)
    if not (head["delta_marker"] or head["counters_since_delta_snapshot"]):
        return "inconsistent"
    if marker == 0:
        return "delta_counters_only"
    bare = [c for c in cps if c["checkpoint_ns"] == "" and c["step"] >= 0
            and not c["delta_marker"] and not c["counters_since_delta_snapshot"]]
    return "migrated" if bare else "delta"


def test_every_fixture_thread_is_listed_with_manifest_counts_and_mode(fixture_backend, runtime_for, staff_client):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    response = staff_client.get(URL, {"limit": 1000})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"threads", "next_cursor"}
    assert body["next_cursor"] is None
    listed = {t["thread_id"]: t for t in body["threads"]}
    assert len(listed) == len(body["threads"]), "a thread is listed twice"
    assert set(listed) == {t["thread_id"] for t in oracle.threads()}
    for manifest_thread in oracle.threads():
        tid = manifest_thread["thread_id"]
        item = listed[tid]
        assert set(item) == ITEM_KEYS, tid
        assert item["checkpoint_count"] == manifest_thread["backend_independent"]["checkpoint_count"], tid
        assert item["checkpoint_count"] == manifest_thread["backends"][backend]["checkpoint_count"], tid
        assert (item["mode"], item["mode_evidence"]) == oracle.expected_mode(tid), tid
        assert item["thread_class"] == _expected_class(tid, backend), tid
        updated = dt.datetime.fromisoformat(item["updated_at"])
        assert updated.tzinfo is not None, tid
        newest_ts = max(dt.datetime.fromisoformat(c["ts"]) for c in oracle.checkpoints(tid, backend))
        assert abs(updated - newest_ts) < dt.timedelta(seconds=1), tid


def test_list_is_newest_update_first(fixture_backend, runtime_for, staff_client):
    _backend, database = fixture_backend
    runtime_for(database, "full")
    threads = staff_client.get(URL, {"limit": 1000}).json()["threads"]
    times = [t["updated_at"] for t in threads]
    assert times == sorted(times, reverse=True)


def test_marker_classes_cover_the_catalog(sqlite_fixture_db, runtime_for, staff_client):
    """The fixture's special threads land in the classes the inventory documents."""
    runtime_for(sqlite_fixture_db, "delta")
    listed = {t["thread_id"]: t for t in staff_client.get(URL, {"limit": 1000}).json()["threads"]}
    by_category: dict[str, set[str]] = {}
    for t in oracle.threads():
        by_category.setdefault(t["category"], set()).add(listed[t["thread_id"]]["thread_class"])
    assert by_category["full"] == {"full"}
    assert by_category["empty"] == {"full"}  # DeerFlow's create path stamps no marker
    assert by_category["delta"] == {"delta"}
    assert by_category["migrated"] == {"migrated"}
    # Marker-less and headed by a snapshot checkpoint (counters dropped): the head looks full.
    assert by_category["markerless"] == {"inconsistent"}


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_keyset_pagination_visits_every_thread_once(fixture_backend, runtime_for, staff_client, mode):
    _backend, database = fixture_backend
    runtime_for(database, mode)
    pages = []
    cursor = None
    while True:
        params = {"limit": 5, **({"cursor": cursor} if cursor else {})}
        body = staff_client.get(URL, params).json()
        pages.append([t["thread_id"] for t in body["threads"]])
        cursor = body["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 50
    visited = [tid for page in pages for tid in page]
    total = len(oracle.threads())
    assert len(visited) == total, "a thread was visited twice or skipped"
    assert set(visited) == {t["thread_id"] for t in oracle.threads()}
    assert all(len(page) == 5 for page in pages[:-1])
    assert len(pages) == -(-total // 5)
    assert visited == [t["thread_id"] for t in staff_client.get(URL, {"limit": 1000}).json()["threads"]]


def test_mode_filter(fixture_backend, runtime_for, staff_client):
    _backend, database = fixture_backend
    runtime_for(database, "delta")
    delta = _all_threads(staff_client, mode="delta", limit=7)
    full = _all_threads(staff_client, mode="full", limit=7)
    assert {t["thread_id"] for t in delta} == set(oracle.delta_thread_ids())
    assert {t["thread_id"] for t in full} == set(oracle.full_thread_ids())
    assert all(t["mode"] == "delta" for t in delta)
    assert all(t["mode"] == "full" and t["mode_evidence"] is None for t in full)


@pytest.mark.parametrize("thread_class", ["full", "delta", "delta_counters_only", "migrated", "inconsistent"])
def test_thread_class_filter(sqlite_fixture_db, runtime_for, staff_client, thread_class):
    runtime_for(sqlite_fixture_db, "delta")
    everything = _all_threads(staff_client, limit=1000)
    filtered = _all_threads(staff_client, thread_class=thread_class, limit=3)
    assert [t["thread_id"] for t in filtered] == [
        t["thread_id"] for t in everything if t["thread_class"] == thread_class]


def test_q_filters_by_thread_id_substring(fixture_backend, runtime_for, staff_client):
    _backend, database = fixture_backend
    runtime_for(database, "delta")
    ids = {t["thread_id"] for t in _all_threads(staff_client, q="f10-1")}
    assert ids == {tid for tid in (t["thread_id"] for t in oracle.threads()) if "f10-1" in tid}
    assert ids == {"delta-f10-1t", "delta-f10-10t", "delta-f10-11t", "markerless-delta-f10-13t"}
    combined = _all_threads(staff_client, q="untrusted", mode="full")
    assert [t["thread_id"] for t in combined] == ["full-untrusted-content"]


@pytest.mark.parametrize("q", ["%", "_", "f10_1", "f10%1", "\\", "'", "' OR 1=1 --"])
def test_q_treats_like_wildcards_and_quotes_literally(fixture_backend, runtime_for, staff_client, q):
    _backend, database = fixture_backend
    runtime_for(database, "delta")
    response = staff_client.get(URL, {"q": q})
    assert response.status_code == 200
    assert response.json() == {"threads": [], "next_cursor": None}


def test_q_ignores_case_on_both_backends(fixture_backend, runtime_for, staff_client):
    """An id pasted from a log in upper case finds the thread (Postgres' strpos alone would not)."""
    _backend, database = fixture_backend
    runtime_for(database, "delta")
    expected = {t["thread_id"] for t in oracle.threads() if "full-" in t["thread_id"]}
    assert expected and {t["thread_id"] for t in _all_threads(staff_client, q="FULL-")} == expected
    assert {t["thread_id"] for t in _all_threads(staff_client, q="Full-Untrusted")} == {"full-untrusted-content"}


def test_q_filters_ids_with_wildcard_characters(sqlite_fixture_db_rw, runtime_for, staff_client):
    from tests.dashboard.writes import write_thread

    for tid in ["100%_done", "100x_done", "100%xdone", "a_b", "axb", "Run-7F3A"]:
        write_thread(sqlite_fixture_db_rw, tid)
    runtime_for(sqlite_fixture_db_rw, "full")

    def ids(q):
        return {t["thread_id"] for t in _all_threads(staff_client, q=q)}

    assert ids("%_") == {"100%_done"}
    assert ids("0%") == {"100%_done", "100%xdone"}
    assert ids("_d") == {"100%_done", "100x_done"}
    assert ids("a_b") == {"a_b"}
    assert ids("run-7f3a") == ids("RUN-7F3A") == {"Run-7F3A"}


@pytest.mark.parametrize("query", [
    {"limit": "0"}, {"limit": "-1"}, {"limit": "1001"}, {"limit": "ten"}, {"limit": "1.5"},
    {"mode": "sideways"}, {"thread_class": "weird"},
])
def test_bad_parameters_answer_400(sqlite_fixture_db, runtime_for, staff_client, query):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get(URL, query)
    assert response.status_code == 400
    body = response.json()
    assert body["detail"].startswith("Invalid query parameters:")
    assert next(iter(query)) in body["detail"]
    assert body["hint"]


@pytest.mark.parametrize("cursor", [
    "garbage",
    "!!!!",
    "é",
    base64.urlsafe_b64encode(b'{"a": 1}').decode().rstrip("="),
    base64.urlsafe_b64encode(b'["only-one"]').decode().rstrip("="),
    base64.urlsafe_b64encode(b"\xff\xfe").decode().rstrip("="),
])
def test_garbage_cursor_answers_400(sqlite_fixture_db, runtime_for, staff_client, cursor):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get(URL, {"cursor": cursor})
    assert response.status_code == 400
    body = response.json()
    assert "cursor" in body["detail"]
    assert body["hint"]


@pytest.mark.parametrize("url", [URL, "/api/threads/delta-f10-1t/state", "/api/threads/delta-f10-1t/history"])
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_api_is_get_only_with_json_405(sqlite_fixture_db, runtime_for, staff_client, url, method):
    runtime_for(sqlite_fixture_db, "delta")
    response = getattr(staff_client, method)(url)
    assert response.status_code == 405
    assert response["Allow"] == "GET"
    assert set(response.json()) >= {"detail", "hint"}
