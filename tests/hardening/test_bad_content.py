"""Odd but valid content, written through LangGraph's saver as DeerFlow would, reads back whole on every route.

* a 2,000-character thread id (the longest the query routes accept; one more is a 400);
* a 1 MB message;
* NUL bytes in a message, and text that was not UTF-8 (lone surrogates from
  ``surrogateescape``; LangGraph's serializer stores them as ``?``) plus raw
  bytes in ``additional_kwargs``;
* channels added by middleware that DeerFlow's schema does not declare: kept
  and shown raw on the page and in the API instead of being dropped;
* bytes that are not UTF-8 in a URL path or query.

Hostile markup in content is covered by ``tests/dashboard`` and ``tests/browser``.
"""

from __future__ import annotations

import operator
from typing import Annotated
from urllib.parse import quote

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.config.database_config import DatabaseConfig
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from deerflow.storage.savers import open_checkpointer
from tests.dashboard.html import parse
from tests.dashboard.writes import write_thread

pytestmark = pytest.mark.django_db

LONG_ID = "long-" + "x" * 1995
assert len(LONG_ID) == 2000
MEGABYTE = "0123456789abcdef" * 65536  # 1 MiB of text
NOT_UTF8 = b"caf\xe9 \xff\xfe raw".decode("utf-8", "surrogateescape")


@pytest.fixture
def db(sqlite_fixture_db_rw: DatabaseConfig) -> DatabaseConfig:
    return sqlite_fixture_db_rw


def messages_of(client, thread_id: str) -> list[dict]:
    response = client.get(f"/api/threads/{quote(thread_id, safe='')}/state")
    assert response.status_code == 200, response.content[:300]
    return response.json()["values"]["messages"]


def page(client, url: str):
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return parse(response.content)


# -- thread ids ----------------------------------------------------------------
def test_a_2000_character_thread_id(db, runtime_for, staff_client):
    write_thread(db, LONG_ID, mode="delta", turns=["first", "second"])
    runtime_for(db, "delta")
    listed = staff_client.get("/api/threads", {"q": LONG_ID}).json()["threads"]
    assert [t["thread_id"] for t in listed] == [LONG_ID]
    assert [m["content"] for m in messages_of(staff_client, LONG_ID)] == ["first", "echo: first", "second",
                                                                          "echo: second"]
    history = staff_client.get(f"/api/threads/{LONG_ID}/history").json()["checkpoints"]
    assert history and history[0]["message_count"] == 4
    html = page(staff_client, f"/threads/{LONG_ID}/")
    assert LONG_ID in html.text and "echo: second" in html.text
    assert LONG_ID in page(staff_client, f"/thread/?thread_id={LONG_ID}").text
    assert LONG_ID in page(staff_client, f"/threads/?q={LONG_ID}").text


def test_one_character_more_is_a_clear_400_on_the_query_routes(db, runtime_for, staff_client):
    runtime_for(db, "delta")
    response = staff_client.get("/thread/", {"thread_id": LONG_ID + "y"})
    assert response.status_code == 400
    assert "thread_id" in response.content.decode() and "2000" in response.content.decode()
    assert staff_client.get("/api/threads", {"q": LONG_ID + "y"}).status_code == 400


@pytest.mark.parametrize("path", ["/threads/%FF%FE/", "/api/threads/%FF%FE/state", "/history/%C3%28/"])
def test_a_path_that_is_not_utf8_is_an_ordinary_404(db, runtime_for, staff_client, path):
    runtime_for(db, "delta")
    assert staff_client.get(path).status_code == 404


def test_a_query_that_is_not_utf8_answers_without_error(db, runtime_for, staff_client):
    runtime_for(db, "delta")
    assert staff_client.get("/api/threads?q=%FF%FE").json()["threads"] == []
    assert staff_client.get("/threads/?q=%FF%FE").status_code == 200


# -- message content -------------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "delta"])
def test_a_one_megabyte_message(db, runtime_for, staff_client, mode):
    write_thread(db, f"mb-{mode}", mode=mode, turns=[MEGABYTE])
    runtime_for(db, "delta")
    contents = [m["content"] for m in messages_of(staff_client, f"mb-{mode}")]
    assert contents == [MEGABYTE, "echo: " + MEGABYTE]
    html = staff_client.get(f"/threads/mb-{mode}/").content.decode()
    # The page shows a preview and says so (never truncated silently); "Show all" has the whole text.
    assert MEGABYTE not in html and len(html) < 150_000
    doc = parse(html)
    for index, text in enumerate(contents):
        item = doc.find("li", id=f"m-{index}")
        assert f"{len(text) - 2000:,} more characters not shown" in item.find("p", cls="truncated").text
        whole = staff_client.get(item.find("a", cls="show-all").attrs["href"]).content.decode()
        assert whole.count(MEGABYTE) == 1


def test_nul_bytes_in_a_message(db, runtime_for, staff_client):
    write_thread(db, "nul", mode="delta", turns=["before\x00after"])
    runtime_for(db, "delta")
    assert [m["content"] for m in messages_of(staff_client, "nul")] == ["before\x00after", "echo: before\x00after"]
    response = staff_client.get("/threads/nul/")
    assert response.status_code == 200
    assert "before" in response.content.decode() and "after" in response.content.decode()


def test_text_that_was_not_utf8_and_raw_bytes(db, runtime_for, staff_client):
    schema = get_thread_state_schema("delta", 10)
    builder = StateGraph(schema)
    builder.add_node("agent", lambda state: {"messages": [
        AIMessage(content="raw", id="ai-raw", additional_kwargs={"payload": b"\xff\xfe\x00binary"})]})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    with open_checkpointer(db) as saver:
        graph = builder.compile(checkpointer=saver)
        config = inject_checkpoint_mode({"configurable": {"thread_id": "not-utf8"}}, "delta")
        graph.invoke({"messages": [HumanMessage(content=NOT_UTF8, id="h-0")]}, config)
    runtime_for(db, "delta")
    human, ai = messages_of(staff_client, "not-utf8")
    assert human["content"] == "caf? ?? raw"  # what LangGraph's serializer stored for the lone surrogates
    assert ai["additional_kwargs"]["payload"] == {"__bytes_base64__": "//4AYmluYXJ5"}
    assert "caf? ?? raw" in page(staff_client, "/threads/not-utf8/").text


# -- channels added by middleware ------------------------------------------------------
def _write_with_middleware_channels(database: DatabaseConfig, mode: str, thread_id: str) -> None:
    base = get_thread_state_schema(mode, 10)

    class WithMiddleware(base):  # type: ignore[misc, valid-type]
        guardrail_verdicts: Annotated[list, operator.add]
        mw_scratch: dict

    def agent(state) -> dict:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"echo {n}", id=f"ai-{n}")],
                "guardrail_verdicts": [f"verdict {n}"], "mw_scratch": {"turn": n, "note": "<b>raw</b>"}}

    builder = StateGraph(WithMiddleware)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    with open_checkpointer(database) as saver:
        graph = builder.compile(checkpointer=saver)
        config = inject_checkpoint_mode({"configurable": {"thread_id": thread_id}}, mode)
        for turn in range(3):
            graph.invoke({"messages": [HumanMessage(content=f"turn {turn}", id=f"h-{turn}")]}, config)


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_middleware_channels_are_kept_and_shown_raw(db, runtime_for, staff_client, mode):
    _write_with_middleware_channels(db, mode, f"mw-{mode}")
    runtime_for(db, mode)
    values = staff_client.get(f"/api/threads/mw-{mode}/state").json()["values"]
    assert values["guardrail_verdicts"] == ["verdict 1", "verdict 3", "verdict 5"]
    assert values["mw_scratch"] == {"turn": 5, "note": "<b>raw</b>"}
    assert len(values["messages"]) == 6
    html = staff_client.get(f"/threads/mw-{mode}/").content.decode()
    assert "guardrail_verdicts" in html and "verdict 5" in html
    assert "&lt;b&gt;raw&lt;/b&gt;" in html and "<b>raw</b>" not in html
