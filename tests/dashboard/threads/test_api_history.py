"""``GET /api/threads/<id>/history``: shape, order, keyset paging, storage facts, namespaces, 409."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.dashboard import oracle

pytestmark = pytest.mark.django_db

ROW_KEYS = {"checkpoint_id", "parent_checkpoint_id", "checkpoint_ns", "step", "source", "created_at", "mode",
            "messages_stored", "message_count", "problem", "disagreement", "langgraph_message_count"}


def history_url(thread_id: str) -> str:
    return f"/api/threads/{quote(thread_id, safe='/')}/history"


def walk(client, thread_id: str, limit: int, checkpoint_ns: str = "") -> list[list[dict]]:
    """Every page of a namespace's history, following ``next_before``."""
    pages: list[list[dict]] = []
    before = None
    while True:
        query = {"limit": limit, "checkpoint_ns": checkpoint_ns, **({"before": before} if before else {})}
        response = client.get(history_url(thread_id), query)
        assert response.status_code == 200, (thread_id, before, response.content[:300])
        body = response.json()
        assert set(body) == {"checkpoints", "next_before"}
        pages.append(body["checkpoints"])
        before = body["next_before"]
        if before is None:
            return pages
        assert before == body["checkpoints"][-1]["checkpoint_id"]
        assert len(pages) <= 2000


def assert_rows_match_manifest(rows: list[dict], expected: list[dict], backend: str, thread_id: str) -> None:
    assert [r["checkpoint_id"] for r in rows] == [c["checkpoint_id"] for c in expected], \
        f"{thread_id}@{backend}: history is not the manifest's newest-first order"
    # the replay rule departs from LangGraph's reader (the manifest's) at a fork's input checkpoint and its
    # descendants (issue 13, item 4): the row carries LangGraph's count beside the rule's
    differ = {cid for _ns, cid in oracle.fork_input_checkpoints(oracle.checkpoints(thread_id, backend))}
    for row, cp in zip(rows, expected, strict=True):
        where = f"{thread_id}@{backend} {cp['checkpoint_id']}"
        if cp["checkpoint_id"] in differ:
            assert (row["disagreement"], row["langgraph_message_count"]) == ("fork_input", cp["message_count"]), where
            assert row["message_count"] < cp["message_count"], where
            continue
        assert (row["disagreement"], row["langgraph_message_count"]) == (None, None), where
        assert set(row) == ROW_KEYS, where
        assert row["parent_checkpoint_id"] == cp["parent_checkpoint_id"], where
        assert row["checkpoint_ns"] == cp["checkpoint_ns"], where
        assert (row["step"], row["source"]) == (cp["step"], cp["source"]), where
        assert row["created_at"] == cp["ts"], where
        assert row["mode"] == ("delta" if cp["delta_marker"] or cp["counters_since_delta_snapshot"] else "full"), where
        assert row["messages_stored"] == cp["messages_stored"], where
        assert row["message_count"] == cp["message_count"], where


@pytest.mark.parametrize("thread_id", ["delta-f10-fork", "full-rollback", "migrated-full20-delta20",
                                       "markerless-delta-f10-13t", "delta-f10-subgraph", "delta-empty"])
def test_paging_visits_every_root_checkpoint_once(fixture_backend, runtime_for, staff_client, thread_id):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    pages = walk(staff_client, thread_id, limit=7)
    expected = oracle.root_checkpoints(thread_id, backend)
    assert all(len(page) == 7 for page in pages[:-1])
    assert len(pages) == max(1, -(-len(expected) // 7))
    rows = [row for page in pages for row in page]
    assert len({r["checkpoint_id"] for r in rows}) == len(rows), "a checkpoint was visited twice"
    assert_rows_match_manifest(rows, expected, backend, thread_id)


LONG_THREAD = 300  # root checkpoints; longer threads are sampled at both ends (the state sweep reads them all)


@pytest.mark.slow
def test_every_thread_history_matches_manifest(fixture_backend, runtime_for, staff_client):
    """Every thread's root-namespace history, paged, against the per-backend manifest.

    Threads up to :data:`LONG_THREAD` checkpoints are walked completely; the
    longer ones (752 and 1200 checkpoints) are read from the head and from
    below the 1024th newest checkpoint (where LangGraph's locked Postgres
    saver lost the delta history) down to the root.
    """
    backend, database = fixture_backend
    runtime_for(database, "delta")
    sampled = 0
    for t in oracle.threads():
        tid = t["thread_id"]
        expected = oracle.root_checkpoints(tid, backend)
        if len(expected) <= LONG_THREAD:
            rows = [row for page in walk(staff_client, tid, limit=250) for row in page]
            assert_rows_match_manifest(rows, expected, backend, tid)
            continue
        sampled += 1
        head = staff_client.get(history_url(tid), {"limit": 100}).json()
        assert_rows_match_manifest(head["checkpoints"], expected[:100], backend, tid)
        assert head["next_before"] == expected[99]["checkpoint_id"]
        start = len(expected) - 120
        tail = [row for page in _walk_from(staff_client, tid, expected[start - 1]["checkpoint_id"]) for row in page]
        assert_rows_match_manifest(tail, expected[start:], backend, tid)
    assert sampled == 2


def test_history_is_newest_first_by_checkpoint_id(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    rows = staff_client.get(history_url("delta-f10-fork"), {"limit": 500}).json()["checkpoints"]
    ids = [r["checkpoint_id"] for r in rows]
    assert ids == sorted(ids, reverse=True)
    times = [r["created_at"] for r in rows]
    assert times == sorted(times, reverse=True)


def test_default_page_size_is_50(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    body = staff_client.get(history_url("delta-f10-50t")).json()
    assert len(body["checkpoints"]) == 50
    assert body["next_before"] == body["checkpoints"][-1]["checkpoint_id"]


def test_history_reports_every_storage_shape(fixture_backend, runtime_for, staff_client):
    """``plain``, ``delta_snapshot`` and ``absent`` all appear on the migrated thread."""
    backend, database = fixture_backend
    runtime_for(database, "delta")
    rows = [r for page in walk(staff_client, "migrated-full20-delta20", limit=500) for r in page]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["messages_stored"]] = counts.get(r["messages_stored"], 0) + 1
    assert counts == oracle.thread("migrated-full20-delta20")["backends"][backend]["messages_stored_summary"]
    assert {r["mode"] for r in rows} == {"full", "delta"}


def test_subgraph_namespaces(fixture_backend, runtime_for, staff_client):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    subgraph = [c for c in oracle.checkpoints("delta-f10-subgraph", backend) if c["checkpoint_ns"]]
    namespaces = list(dict.fromkeys(c["checkpoint_ns"] for c in subgraph))
    assert namespaces == list(
        oracle.thread("delta-f10-subgraph")["backends"][backend]["namespace_checkpoint_counts"])[1:]
    for ns in namespaces:
        rows = [r for page in walk(staff_client, "delta-f10-subgraph", limit=2, checkpoint_ns=ns) for r in page]
        assert all(r["checkpoint_ns"] == ns for r in rows)
        assert_rows_match_manifest(rows, [c for c in subgraph if c["checkpoint_ns"] == ns], backend,
                                   "delta-f10-subgraph")
    root = [r for page in walk(staff_client, "delta-f10-subgraph", limit=500) for r in page]
    assert all(r["checkpoint_ns"] == "" for r in root)
    assert len(root) == oracle.thread("delta-f10-subgraph")["backend_independent"]["namespace_checkpoint_counts"][""]


@pytest.mark.parametrize("thread_id", ["delta-f10-9t", "migrated-full20-delta20", "markerless-delta-f10-13t",
                                       "delta-f10-subgraph", "delta-f10-untrusted-content"])
def test_full_mode_on_delta_thread_is_409(fixture_backend, runtime_for, staff_client, thread_id):
    _backend, database = fixture_backend
    runtime_for(database, "full")
    response = staff_client.get(history_url(thread_id))
    assert response.status_code == 409
    body = response.json()
    assert body["detail"] == oracle.mismatch_detail(thread_id)
    assert "delta" in body["hint"] and "full" in body["hint"]


def test_full_mode_history_of_migrated_thread_stops_at_the_delta_era(sqlite_fixture_db, runtime_for, staff_client):
    """Below the last full-era checkpoint the lineage is all full, so full mode may page there."""
    runtime_for(sqlite_fixture_db, "full")
    cps = oracle.root_checkpoints("migrated-full20-delta20", "sqlite")
    by_key = {(c["checkpoint_ns"], c["checkpoint_id"]): c for c in cps}
    first_full = next(i for i, c in enumerate(cps) if not oracle.lineage_has_delta(c, by_key))
    before = cps[first_full - 1]["checkpoint_id"]
    rows = [r for page in _walk_from(staff_client, "migrated-full20-delta20", before) for r in page]
    assert_rows_match_manifest(rows, cps[first_full:], "sqlite", "migrated-full20-delta20")
    # One page that reaches into the delta era is refused as a whole.
    response = staff_client.get(history_url("migrated-full20-delta20"),
                                {"before": cps[first_full - 2]["checkpoint_id"]})
    assert response.status_code == 409


def _walk_from(client, thread_id: str, before: str) -> list[list[dict]]:
    pages = []
    while before:
        body = client.get(history_url(thread_id), {"limit": 40, "before": before}).json()
        pages.append(body["checkpoints"])
        before = body["next_before"]
    return pages


@pytest.mark.parametrize("thread_id", ["full-tools-30t", "full-untrusted-content", "full-empty", "delta-empty"])
def test_full_mode_history_of_full_threads(sqlite_fixture_db, runtime_for, staff_client, thread_id):
    runtime_for(sqlite_fixture_db, "full")
    rows = [r for page in walk(staff_client, thread_id, limit=100) for r in page]
    assert_rows_match_manifest(rows, oracle.root_checkpoints(thread_id, "sqlite"), "sqlite", thread_id)


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "501"}, {"limit": "x"}, {"before": "b" * 201}])
def test_bad_history_parameters_answer_400(sqlite_fixture_db, runtime_for, staff_client, query):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get(history_url("delta-f10-9t"), query)
    assert response.status_code == 400
    assert set(response.json()) >= {"detail", "hint"}


def test_before_must_name_a_checkpoint_of_the_namespace(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    unknown = staff_client.get(history_url("delta-f10-9t"), {"before": "1f000000-0000-6000-8000-000000000000"})
    assert unknown.status_code == 404
    assert set(unknown.json()) >= {"detail", "hint"}
    other_thread = oracle.root_checkpoints("delta-f10-10t", "sqlite")[0]["checkpoint_id"]
    assert staff_client.get(history_url("delta-f10-9t"), {"before": other_thread}).status_code == 404
    sub = next(c for c in oracle.checkpoints("delta-f10-subgraph", "sqlite") if c["checkpoint_ns"])
    assert staff_client.get(history_url("delta-f10-subgraph"), {"before": sub["checkpoint_id"]}).status_code == 404


def test_unknown_namespace_is_404(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get(history_url("delta-f10-subgraph"), {"checkpoint_ns": "research:nope"})
    assert response.status_code == 404
    assert set(response.json()) >= {"detail", "hint"}
