"""The hot pages' shortcuts (issue 15 item 7) never change what they show.

The list's rows and a thread page's message items are cached fragments: changed inputs never show old HTML.
The cache key is a digest of what each fragment draws (``dashboard.threads.fragments``), so these tests
change exactly one input at a time and expect the page to follow it, with the same process and cache.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.core.cache import cache
from langchain_core.messages import AIMessage, HumanMessage

from deerflow.config.database_config import DatabaseConfig
from tests.dashboard.html import parse
from tests.dashboard.writes import write_thread
from tests.deerflow.convert.support import config_for, open_saver

pytestmark = pytest.mark.django_db

CHECKPOINT_ID = "1f0c0000-0000-6000-8000-000000000001"


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def _fresh(tmp_path: Path) -> DatabaseConfig:
    """An empty SQLite checkpoint database with LangGraph's tables (the saver's own ``setup``)."""
    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path))
    with open_saver(database):
        pass
    return database


def _row(client, thread_id: str):
    return next(tr for tr in parse(client.get("/threads/").content).find_all("tr")
                if tr.attrs.get("data-thread-id") == thread_id)


def _row_classes(client, thread_id: str) -> list[str]:
    return sorted(_row(client, thread_id).classes)


def _row_count(client, thread_id: str) -> int:
    return int(_row(client, thread_id).find_all("td")[3].text.replace(",", ""))


def test_list_rows_follow_a_new_turn_after_refresh(tmp_path: Path, runtime_for, staff_client):
    database = _fresh(tmp_path / "data")
    write_thread(database, "cached-list", turns=["one"])
    runtime_for(database, "full")
    before = _row_count(staff_client, "cached-list")
    assert before == _row_count(staff_client, "cached-list")  # the second answer comes from the cache
    write_thread(database, "cached-list", turns=["two"])
    assert staff_client.post("/threads/").status_code == 302  # Refresh: the summary takes the new turn
    after = _row_count(staff_client, "cached-list")
    assert after > before


def test_list_rows_follow_the_process_mode(tmp_path: Path, runtime_for, staff_client):
    database = _fresh(tmp_path / "data")
    write_thread(database, "cached-delta", mode="delta", turns=["one"])
    runtime_for(database, "delta")
    assert _row_classes(staff_client, "cached-delta") == []
    runtime_for(database, "full")
    assert _row_classes(staff_client, "cached-delta") == ["refused"]


def _put_one(database: DatabaseConfig, text: str) -> None:
    """A full-mode checkpoint with a fixed id holding one human message ``text`` (the saver's own ``put``)."""
    with open_saver(database) as saver:
        version = saver.get_next_version(None, None)
        checkpoint = {"v": 4, "id": CHECKPOINT_ID, "ts": dt.datetime.now(dt.UTC).isoformat(),
                      "channel_values": {"messages": [HumanMessage(text, id="h0"), AIMessage("ok", id="a0")]},
                      "channel_versions": {"messages": version}, "versions_seen": {}, "updated_channels": None}
        saver.put(config_for("same-ids", None), checkpoint, {"source": "loop", "step": 0, "parents": {}},
                  {"messages": version})


def _first_lines(client) -> list[str]:
    html = client.get("/threads/same-ids/", {"checkpoint_id": CHECKPOINT_ID}).content
    return [span.text for span in parse(html).find_all("span", cls="line")]


def test_same_checkpoint_id_in_another_database_shows_its_own_messages(tmp_path: Path, runtime_for, staff_client):
    first = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "one"))
    second = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "two"))
    _put_one(first, "alpha <b>bold</b>")
    _put_one(second, "beta")
    runtime_for(first, "full")
    assert _first_lines(staff_client)[0] == "alpha <b>bold</b>"  # escaped text, read back as text
    assert b"<b>bold</b>" not in staff_client.get("/threads/same-ids/").content
    runtime_for(second, "full")
    assert _first_lines(staff_client)[0] == "beta"


def test_search_and_role_are_part_of_the_key(tmp_path: Path, runtime_for, staff_client):
    database = _fresh(tmp_path / "data")
    write_thread(database, "cached-search", turns=["apples", "pears"])
    runtime_for(database, "full")
    all_lines = [s.text for s in
                 parse(staff_client.get("/threads/cached-search/").content).find_all("span", cls="line")]
    assert all_lines == ["apples", "echo: apples", "pears", "echo: pears"]
    hits = parse(staff_client.get("/threads/cached-search/", {"q": "pears"}).content).find_all("li", cls="message")
    assert [li.attrs["id"] for li in hits] == ["m-2", "m-3"]
    humans = parse(staff_client.get("/threads/cached-search/", {"role": "human"}).content).find_all("li", cls="message")
    assert [li.attrs["id"] for li in humans] == ["m-0", "m-2"]


def test_a_thread_pages_job_list_is_read_through_the_thread_id_index():
    from dashboard.jobs.models import ThreadResult

    plan = ThreadResult.objects.filter(thread_id="t").select_related("job").order_by("-job__created_at").explain()
    assert "jobs_result_thread_idx" in plan, plan


def test_content_rewritten_under_the_same_checkpoint_id_shows_the_new_messages(tmp_path: Path, runtime_for,
                                                                               staff_client):
    # Same database, thread and checkpoint id; the row is rewritten (a saver's upsert): the message items
    # are keyed by the messages they draw, not by the checkpoint id, so the page follows the new content.
    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "one"))
    _put_one(database, "before")
    runtime_for(database, "full")
    assert _first_lines(staff_client) == ["before", "ok"]
    assert _first_lines(staff_client) == ["before", "ok"]  # served from the cache the second time
    _put_one(database, "after <i>it</i>")
    assert _first_lines(staff_client) == ["after <i>it</i>", "ok"]


def test_an_unfiltered_page_keys_its_items_by_the_messages_and_builds_them_only_when_drawn():
    from langchain_core.messages import ToolMessage

    from dashboard.threads.fragments import message_items_key
    from dashboard.threads.messages import message_page

    def thread(args: dict, result: str, name: str | None = None) -> list:
        return [HumanMessage("find x", id="h0"),
                AIMessage("", id="a0", name=name, tool_calls=[{"name": "search", "args": args, "id": "c1"}]),
                ToolMessage(result, tool_call_id="c1", id="t0"), AIMessage("x is 1", id="a1")]

    page = message_page(thread({"q": "x"}, "1"))
    key = message_items_key(None, "t", "", "cp", page)
    assert "items" not in page.__dict__  # the key did not build the items
    assert (page.total, page.pages, page.first, page.last, page.shown) == (4, 1, 1, 4, 4)
    assert [(i.index, i.first_line, [r.index for r in i.results]) for i in page.items] == [
        (0, "find x", []), (1, "→ search", [2]), (3, "x is 1", [])]
    assert message_items_key(None, "t", "", "cp", message_page(thread({"q": "x"}, "1"))) == key
    for other in (thread({"q": "y"}, "1"), thread({"q": "x"}, "2"), thread({"q": "x"}, "1", name="bot")):
        assert message_items_key(None, "t", "", "cp", message_page(other)) != key
    # Another grouping of the same messages (page size 1: each group alone on a page) is another key.
    assert message_items_key(None, "t", "", "cp", message_page(thread({"q": "x"}, "1"), page_size=1)) != key
    hits = message_page(thread({"q": "x"}, "1"), q="x is")
    assert [i.index for i in hits.items] == [3] and hits.shown == 1
    assert message_items_key(None, "t", "", "cp", hits) != key


def test_fragment_keys_digest_every_part_and_fall_back_to_repr():
    import threading

    from dashboard.threads.fragments import fragment_key

    assert fragment_key("a", {"x": [1, 2]}) == fragment_key("a", {"x": [1, 2]})
    assert len({fragment_key("a", v) for v in (1, 1.0, True, "1", (1,), [1], None)}) == 7
    lock = threading.Lock()  # does not pickle: digested by repr
    assert fragment_key("a", lock) == fragment_key("a", lock) != fragment_key("a", threading.Lock())


def test_the_grouping_reads_tool_calls_as_getattr_does():
    from langchain_core.messages import SystemMessage, ToolMessage

    from dashboard.threads.messages import _tool_calls

    calls = [{"name": "search", "args": {}, "id": "c1"}]

    class Plain:
        tool_calls = calls

    class Computed:
        @property
        def tool_calls(self):
            return calls

    class Nothing:
        pass

    for message in (HumanMessage("q"), AIMessage("a"), AIMessage("", tool_calls=calls), SystemMessage("s"),
                    ToolMessage("r", tool_call_id="c1"), HumanMessage("q", tool_calls=calls),  # an extra field
                    Plain(), Computed(), Nothing(), "text", None):
        assert _tool_calls(message) == getattr(message, "tool_calls", None), message


def test_the_message_section_key_follows_the_search_form_and_the_page_numbers():
    from dashboard.threads.forms import ThreadPageForm
    from dashboard.threads.fragments import message_section_key
    from dashboard.threads.messages import message_page

    messages = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(5)]

    def key(data: dict, page: int = 1, page_size: int = 2) -> str:
        form = ThreadPageForm(data)
        assert form.is_valid()
        return message_section_key("items", message_page(messages, page=page, page_size=page_size), form)

    base = key({})
    assert key({}) == base
    assert key({"q": " "}) != base  # the widget draws the bound value, stripped or not
    assert key({"role": "human"}) != base
    assert key({}, page=2) != base and key({}, page_size=3) != base
