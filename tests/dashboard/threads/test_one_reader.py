"""One request, one :class:`deerflow.reader.ThreadReader`: every read a thread page makes shares it.

The constructor is wrapped to count its calls; each request below must build exactly one reader however
many reads it makes (state, diff base, namespaces, history), and answer as before.
"""

from __future__ import annotations

import pytest

from dashboard.threads import services
from deerflow.reader import ThreadReader
from tests.dashboard import oracle
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

THREAD = "delta-f10-subgraph"


@pytest.fixture
def built(monkeypatch) -> list[ThreadReader]:
    """Every ThreadReader the dashboard's thread services build, in order."""
    readers: list[ThreadReader] = []

    def counting(*args, **kwargs) -> ThreadReader:
        readers.append(ThreadReader(*args, **kwargs))
        return readers[-1]

    monkeypatch.setattr(services, "ThreadReader", counting)
    return readers


def _oldest_and_head() -> tuple[str, str]:
    root = [cp["checkpoint_id"] for cp in oracle.checkpoints(THREAD, "sqlite") if cp["checkpoint_ns"] == ""]
    return root[-1], root[0]


@pytest.mark.parametrize("query", [
    {},
    {"view": "json"},
    {"view": "message", "index": 0},
    {"page": 1},
    "diff",
], ids=["page", "json", "message", "messages-fragment", "diff"])
def test_each_thread_page_request_builds_one_reader(sqlite_fixture_db, runtime_for, staff_client, built, query):
    runtime_for(sqlite_fixture_db, "delta")
    if query == "diff":
        oldest, head = _oldest_and_head()
        query = {"view": "diff", "base": oldest, "checkpoint_id": head}
    headers = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "messages-section"} if "page" in query else {}
    response = staff_client.get(f"/threads/{THREAD}/", query, **headers)
    assert response.status_code == 200
    assert ("<html" in response.content.decode()) is ("page" not in query and query.get("view") != "json")
    assert len(built) == 1


def test_the_page_with_subgraphs_reads_state_and_namespaces_through_one_reader(
        sqlite_fixture_db, runtime_for, staff_client, built):
    runtime_for(sqlite_fixture_db, "delta")
    page = staff_client.get(f"/threads/{THREAD}/")
    assert page.status_code == 200
    namespaces = parse(page.content).find("section", id="namespaces")
    assert namespaces is not None  # the namespaces table was read, with the reader of the state read
    assert len(built) == 1
    staff_client.get(f"/threads/{THREAD}/")
    assert len(built) == 2  # the next request builds its own


@pytest.mark.parametrize("path", [f"/api/threads/{THREAD}/state", f"/api/threads/{THREAD}/history",
                                  f"/api/threads/{THREAD}/namespaces", f"/history/{THREAD}/"])
def test_each_api_and_history_request_builds_one_reader(sqlite_fixture_db, runtime_for, staff_client, built, path):
    runtime_for(sqlite_fixture_db, "delta")
    assert staff_client.get(path).status_code == 200
    assert len(built) == 1
