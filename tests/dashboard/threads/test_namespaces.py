"""Subgraph namespaces on the thread page (a linked table) and ``GET /api/threads/<id>/namespaces``."""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlsplit

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from deerflow.storage.savers import open_checkpointer
from tests.dashboard import oracle
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

HOSTILE_NODE = "<img src=x onerror=alert(1)>"


def _heads(thread_id: str, backend: str) -> dict[str, tuple[int, str]]:
    """``{checkpoint_ns: (checkpoint count, head checkpoint id)}`` from the manifest, in its order."""
    out: dict[str, list[str]] = {}
    for cp in oracle.checkpoints(thread_id, backend):  # newest first inside a namespace
        out.setdefault(cp["checkpoint_ns"], []).append(cp["checkpoint_id"])
    return {ns: (len(ids), ids[0]) for ns, ids in out.items()}


def _rows(html) -> list[dict]:
    table = parse(html).find("section", id="namespaces").find("table")
    out = []
    for tr in table.find_all("tr"):
        cells = tr.find_all("td")
        if cells:
            out.append({"href": cells[0].find("a").attrs["href"], "ns": cells[0].text, "path": cells[1].text,
                        "count": int(cells[2].text), "head": cells[3].find("code").attrs["title"],
                        "current": tr.attrs.get("aria-current") == "page"})
    return out


def test_the_thread_page_links_every_namespace_to_its_own_head(fixture_backend, runtime_for, staff_client):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    expected = _heads("delta-f10-subgraph", backend)
    rows = _rows(staff_client.get("/threads/delta-f10-subgraph/").content)
    assert [(r["ns"] if r["ns"] != "(root)" else "", r["count"], r["head"]) for r in rows] == [
        (ns, count, head) for ns, (count, head) in expected.items()]
    assert [r["path"] for r in rows] == ["—", "research", "research"]
    assert [r["current"] for r in rows] == [True, False, False]
    assert rows[0]["href"] == "/threads/delta-f10-subgraph/"
    for row in rows[1:]:
        ns = parse_qs(urlsplit(row["href"]).query)["checkpoint_ns"]
        assert ns == [row["ns"]]
        page = staff_client.get(row["href"])
        assert page.status_code == 200
        doc = parse(page.content)
        assert [r["current"] for r in _rows(page.content)] == [r["ns"] == row["ns"] for r in rows]
        facts = doc.find("dl", cls="facts")
        labels = [dt.text for dt in facts.find_all("dt")]
        values = [dd.text for dd in facts.find_all("dd")]
        assert dict(zip(labels, values, strict=True))["checkpoint_id"] == row["head"]
        assert dict(zip(labels, values, strict=True))["checkpoint_ns"] == row["ns"]


def test_a_thread_without_subgraphs_shows_no_namespace_table(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    page = staff_client.get("/threads/delta-f10-fanout/")
    assert page.status_code == 200
    assert not parse(page.content).find_all("section", id="namespaces")


def test_the_api_lists_namespaces_root_first(fixture_backend, runtime_for, staff_client):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    body = staff_client.get("/api/threads/delta-f10-subgraph/namespaces").json()
    assert body["thread_id"] == "delta-f10-subgraph"
    assert [(n["checkpoint_ns"], n["checkpoint_count"], n["head_checkpoint_id"]) for n in body["namespaces"]] == [
        (ns, count, head) for ns, (count, head) in _heads("delta-f10-subgraph", backend).items()]
    assert [(n["path"], n["depth"]) for n in body["namespaces"]] == [([], 0), (["research"], 1), (["research"], 1)]
    assert all(n["updated_at"].endswith("+00:00") for n in body["namespaces"])


def test_the_api_answers_every_fixture_thread(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "full")  # inventory, not materialization: a full process may list a delta thread
    for thread in oracle.threads():
        body = staff_client.get(f"/api/threads/{quote(thread['thread_id'], safe='/')}/namespaces").json()
        assert {n["checkpoint_ns"]: n["checkpoint_count"] for n in body["namespaces"]} == \
            thread["backends"]["sqlite"]["namespace_checkpoint_counts"], thread["thread_id"]


def test_an_unknown_thread_is_a_404_and_other_methods_a_405(sqlite_fixture_db, runtime_for, staff_client, client):
    runtime_for(sqlite_fixture_db, "delta")
    missing = staff_client.get("/api/threads/no-such-thread/namespaces")
    assert missing.status_code == 404 and missing.json()["code"] == "thread_not_found"
    post = staff_client.post("/api/threads/delta-f10-subgraph/namespaces")
    assert post.status_code == 405 and post.json()["code"] == "method_not_allowed" and post["Allow"] == "GET"
    assert client.get("/api/threads/delta-f10-subgraph/namespaces").status_code == 401


def _write_hostile_subgraph_thread(database, thread_id: str) -> None:
    """A full-mode thread whose root graph calls a compiled subgraph under a node named :data:`HOSTILE_NODE`."""
    schema = get_thread_state_schema("full", 10)

    def agent(state) -> dict:
        return {"messages": [AIMessage(content="from the subgraph", id="ai-1")]}

    inner = StateGraph(schema)
    inner.add_node("agent", agent)
    inner.add_edge(START, "agent")
    inner.add_edge("agent", END)
    outer = StateGraph(schema)
    outer.add_node(HOSTILE_NODE, inner.compile())
    outer.add_edge(START, HOSTILE_NODE)
    outer.add_edge(HOSTILE_NODE, END)
    with open_checkpointer(database) as saver:
        graph = outer.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage(content="hi", id="human-0")]},
                     inject_checkpoint_mode({"configurable": {"thread_id": thread_id}}, "full"))


def test_a_hostile_subgraph_name_renders_as_text(sqlite_fixture_db_rw, runtime_for, staff_client):
    _write_hostile_subgraph_thread(sqlite_fixture_db_rw, "hostile-subgraph")
    runtime_for(sqlite_fixture_db_rw, "full")
    page = staff_client.get("/threads/hostile-subgraph/")
    assert page.status_code == 200
    assert b"<img src=x" not in page.content
    section = parse(page.content).find("section", id="namespaces")
    assert not section.find_all("img")
    rows = _rows(page.content)
    assert rows[1]["path"] == HOSTILE_NODE and rows[1]["ns"].startswith(HOSTILE_NODE + ":")
    inside = staff_client.get(rows[1]["href"])
    assert inside.status_code == 200 and b"<img src=x" not in inside.content
