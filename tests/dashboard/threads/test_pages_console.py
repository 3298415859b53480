"""The operator's console on the thread page (issue 14, items 1, 2 and 7): one line per message, paging,
search, grouped tool results, truncation with "show all"/download, the raw JSON view, the history tree,
the diff of two checkpoints, pending writes, and full-page fallbacks of the fragment URLs."""

from __future__ import annotations

import json
from urllib.parse import urljoin

import pytest

from tests.dashboard import oracle
from tests.dashboard.html import parse
from tests.dashboard.threads.test_pages_detail import (
    history_rows,
    messages_across_pages,
    messages_on,
    page_url,
)

pytestmark = pytest.mark.django_db

LONGEST = "delta-f100-150t"


def _head_messages(thread_id: str) -> list[dict]:
    return oracle.thread(thread_id)["backend_independent"]["head_state"]["messages"]


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n\n".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text")


def test_longest_thread_page_is_small_and_pages_through_every_message(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get(page_url(LONGEST))
    assert response.status_code == 200
    assert len(response.content) < 150_000, len(response.content)
    doc = parse(response.content)
    first = messages_on(doc)
    assert 100 <= len(first) < 110  # one page; a tool call is never split from its results
    assert doc.find("p", id="messages-count").text.startswith(f"1,050 messages; showing 1–{len(first)} (page 1 of ")
    assert doc.find("div", id="history").attrs["hx-trigger"] == "load"  # the history is not in the page
    expected = _head_messages(LONGEST)
    shown = messages_across_pages(staff_client, page_url(LONGEST), doc)
    assert [m["id"] for m in shown] == [m["id"] for m in expected]
    assert [m["role"] for m in shown] == [m["type"] for m in expected]


def test_every_message_is_one_collapsed_line(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    doc = parse(staff_client.get(page_url(LONGEST)).content)
    items = doc.find("ol", id="messages").find_all("li", cls="message")
    expected = _head_messages(LONGEST)
    for li, want in zip(items, expected, strict=False):
        details = li.find("details")
        assert "open" not in details.attrs  # collapsed
        summary = details.find("summary")
        assert summary.find("span", cls="role").text == want["type"]
        first_line = next((ln.strip() for ln in _text(want["content"]).splitlines() if ln.strip()), "")
        if first_line:
            assert summary.find("span", cls="line").text == " ".join(first_line[:140].split()) + (
                "…" if len(first_line) > 140 else "")
        assert summary.find("span", cls="size").text  # a size is shown


def test_tool_results_are_grouped_under_their_call(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    doc = parse(staff_client.get(page_url(LONGEST)).content)
    expected = {m["id"]: m for m in _head_messages(LONGEST)}
    groups = 0
    for li in doc.find("ol", id="messages").find_all("li", cls="role-ai"):
        results = [r for ol in li.find_all("ol", cls="tool-results") for r in ol.find_all("li", cls="message")]
        call_ids = {c["id"] for c in expected[li.find("span", cls="mid").attrs["title"]]["tool_calls"]}
        for r in results:
            assert expected[r.find("span", cls="mid").attrs["title"]]["tool_call_id"] in call_ids
        groups += bool(results)
    assert groups >= 10


def test_search_within_the_thread(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    needle = "(turn 14"
    want = [m["id"] for m in _head_messages(LONGEST) if needle.casefold() in _text(m["content"]).casefold()]
    assert 5 < len(want) < 100
    response = staff_client.get(page_url(LONGEST), {"q": needle.upper()})
    doc = parse(response.content)
    assert doc.find("p", id="messages-count").text.startswith(f"{len(want)} of 1,050 messages match")
    shown = messages_on(doc)
    assert [m["id"] for m in shown] == want
    marks = [m.text for m in doc.find("ol", id="messages").find_all("mark")]
    assert marks and all(m.casefold() == needle.casefold() for m in marks)
    # Each hit links to the page of the whole list that holds it.
    link = next(a for a in doc.find_all("a") if a.text == "Show in context")
    context = parse(staff_client.get(urljoin("http://testserver/", link.attrs["href"])).content)
    assert want[0] in [m["id"] for m in messages_on(context)]
    # No hit: said so.
    doc = parse(staff_client.get(page_url(LONGEST), {"q": "no such text anywhere 9f3"}).content)
    assert doc.find("p", id="messages-count").text.startswith("0 of 1,050 messages match")
    # Role filter.
    tools = [m["id"] for m in _head_messages(LONGEST) if m["type"] == "tool"]
    doc = parse(staff_client.get(page_url(LONGEST), {"role": "tool"}).content)
    assert doc.find("p", id="messages-count").text.startswith(f"{len(tools):,} of 1,050 messages match")


def test_htmx_search_answers_the_messages_fragment(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    fragment = staff_client.get(page_url(LONGEST), {"q": "turn 1"}, HTTP_HX_REQUEST="true",
                                HTTP_HX_TARGET="messages-section")
    html = fragment.content.decode()
    assert fragment.status_code == 200 and "<html" not in html and 'id="messages-section"' in html
    # The same URL without htmx is the whole page (a reload of a pushed URL).
    page = staff_client.get(page_url(LONGEST), {"q": "turn 1"}).content.decode()
    assert "<html" in page and 'id="messages-section"' in page


def test_large_message_is_cut_with_show_all_and_download(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    thread_id = "full-untrusted-content"
    expected = _head_messages(thread_id)
    big = max(range(len(expected)), key=lambda i: len(_text(expected[i]["content"])))
    text = _text(expected[big]["content"])
    assert len(text) > 1_000_000
    doc = parse(staff_client.get(page_url(thread_id)).content)
    li = doc.find("li", id=f"m-{big}")
    assert f"{len(text) - 2000:,} more characters" in li.find("p", cls="truncated").text
    show_all = li.find("a", cls="show-all").attrs["href"]
    whole = staff_client.get(urljoin("http://testserver/", show_all))
    assert whole.status_code == 200
    page = parse(whole.content)
    assert page.find("div", cls="whole").text == " ".join(text.split())
    assert "<td>" not in whole.content.decode()  # the tool output's markup is escaped
    download = staff_client.get(urljoin("http://testserver/", li.find("a", cls="download").attrs["href"]))
    assert download["Content-Type"] == "text/plain; charset=utf-8"
    assert download["Content-Disposition"].startswith('attachment; filename="full-untrusted-content-')
    assert download.content.decode("utf-8") == text


def test_raw_json_view_and_download_are_the_api_state(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    thread_id = "delta-f10-fork"
    cp = oracle.root_checkpoints(thread_id, "sqlite")[5]
    api = staff_client.get(f"/api/threads/{thread_id}/state", {"checkpoint_id": cp["checkpoint_id"]}).json()
    raw = staff_client.get(page_url(thread_id), {"view": "json", "checkpoint_id": cp["checkpoint_id"]})
    assert raw["Content-Type"] == "application/json; charset=utf-8" and "Content-Disposition" not in raw
    assert json.loads(raw.content) == api
    assert oracle.canonical_from_json(api["values"]["messages"]) and api["checkpoint_id"] == cp["checkpoint_id"]
    download = staff_client.get(page_url(thread_id), {"view": "json", "checkpoint_id": cp["checkpoint_id"],
                                                     "download": "1"})
    assert download["Content-Disposition"] == f'attachment; filename="{thread_id}-{cp["checkpoint_id"]}.json"'
    assert json.loads(download.content) == api
    # The page links to both, for the checkpoint it shows.
    doc = parse(staff_client.get(page_url(thread_id), {"checkpoint_id": cp["checkpoint_id"]}).content)
    assert cp["checkpoint_id"] in doc.find("a", id="raw-json").attrs["href"]
    assert "download=1" in doc.find("a", id="download-state").attrs["href"]


@pytest.mark.parametrize("query, status, words", [
    ({"view": "message"}, 400, "needs index"),
    ({"view": "message", "index": "99"}, 404, "there is no message 99"),
    ({"view": "diff"}, 400, "needs base"),
    ({"view": "diff", "base": "no-such-checkpoint"}, 404, "no-such-checkpoint"),
    ({"view": "nope"}, 400, "view"),
    ({"page": "0"}, 400, "page"),
    ({"page": "abc"}, 400, "page"),
])
def test_bad_console_parameters_get_a_clear_error(sqlite_fixture_db, runtime_for, staff_client, query, status, words):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get(page_url("delta-f10-fork"), query)
    assert response.status_code == status
    assert words in parse(response.content).find("p", id="error-detail").text


def test_page_past_the_end_is_the_last_page(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    doc = parse(staff_client.get(page_url(LONGEST), {"page": "999"}).content)
    assert messages_on(doc)[-1]["id"] == _head_messages(LONGEST)[-1]["id"]


def _all_history(client, thread_id: str) -> list[dict]:
    url, rows = f"/history/{thread_id}/", []
    while url:
        html = client.get(urljoin("http://testserver/", url), HTTP_HX_REQUEST="true").content.decode()
        rows += history_rows(html)
        more = parse(html).find_all("a", hx_swap="outerHTML")
        url = more[0].attrs["hx-get"] if more else None
    return rows


@pytest.mark.parametrize("thread_id", ["delta-f10-fork", "full-rollback", "delta-f10-fork-from-input"])
def test_history_tree_shows_parents_forks_and_branch_tips(fixture_backend, runtime_for, staff_client, thread_id):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    expected = oracle.root_checkpoints(thread_id, backend)
    rows = _all_history(staff_client, thread_id)
    assert [r["checkpoint_id"] for r in rows] == [c["checkpoint_id"] for c in expected]
    assert [r["parent"] for r in rows] == [c["parent_checkpoint_id"] for c in expected]
    children: dict[str, int] = {}
    for c in expected:
        children[c["parent_checkpoint_id"]] = children.get(c["parent_checkpoint_id"], 0) + 1
    forks = {cid for cid, n in children.items() if cid and n > 1}
    assert forks
    assert {r["checkpoint_id"] for r in rows if "fork-point" in r["classes"]} == forks
    # A branch tip: a checkpoint nobody descends from, other than the head.
    tips = {c["checkpoint_id"] for c in expected if c["checkpoint_id"] not in children} - {expected[0]["checkpoint_id"]}
    assert {r["checkpoint_id"] for r in rows if "branch-tip" in r["classes"]} == tips
    # Rows of a second branch are drawn in the second column until they meet the fork point.
    assert any(r["graph"].index("●") > 0 for r in rows)
    differ = {cid for _ns, cid in oracle.fork_input_checkpoints(oracle.checkpoints(thread_id, backend))}
    assert {r["checkpoint_id"]: r["langgraph_message_count"] for r in rows if r["langgraph_message_count"]} == {
        c["checkpoint_id"]: c["message_count"] for c in expected if c["checkpoint_id"] in differ}
    kinds = {"delta_snapshot": "kind-snapshot", "plain": "kind-full-value"}
    for r, c in zip(rows, expected, strict=True):
        assert kinds.get(c["messages_stored"], "kind-delta-step" if r["mode"] == "delta" else "kind-no-messages") \
            in r["classes"]


def test_history_fragment_url_opened_directly_is_a_full_page(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    first = staff_client.get("/history/delta-f10-fork/", HTTP_HX_REQUEST="true").content.decode()
    older = parse(first).find_all("a", hx_swap="outerHTML")[0].attrs["href"]
    page = staff_client.get(urljoin("http://testserver/", older))  # "Older checkpoints" in a new tab
    html = page.content.decode()
    assert page.status_code == 200 and "<html" in html and "app.css" in html
    assert parse(html).find("h1").text == "History of delta-f10-fork"
    assert history_rows(html)
    storage = staff_client.get(page_url("delta-f10-fork"), {"fragment": "storage"}).content.decode()
    assert "<html" in storage and 'id="storage-chart"' in storage
    fragment = staff_client.get(page_url("delta-f10-fork"), {"fragment": "storage"}, HTTP_HX_REQUEST="true")
    assert "<html" not in fragment.content.decode()


def _diff(client, thread_id, base, target):
    response = client.get(page_url(thread_id), {"view": "diff", "base": base, "checkpoint_id": target})
    assert response.status_code == 200
    doc = parse(response.content)
    ids = {}
    for section in ("added", "removed", "changed"):
        ids[section] = [s.attrs["title"] for s in doc.find("section", id=f"diff-{section}").find_all("span", cls="mid")]
    channels = [d.attrs["data-channel"] for d in doc.find("section", id="diff-channels").find_all(cls="channel-change")]
    return ids, channels


def test_diff_between_two_branches_of_the_fork_thread(fixture_backend, runtime_for, staff_client):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    thread_id = "delta-f10-fork"
    cps = oracle.root_checkpoints(thread_id, backend)
    head = cps[0]["checkpoint_id"]
    api = {c["checkpoint_id"]: staff_client.get(f"/api/threads/{thread_id}/state",
                                                  {"checkpoint_id": c["checkpoint_id"]}).json()["values"]
           for c in cps}
    children = {c["parent_checkpoint_id"] for c in cps}
    tip = next(c["checkpoint_id"] for c in cps[1:] if c["checkpoint_id"] not in children)
    for base, target in ((tip, head), (head, tip), (cps[-1]["checkpoint_id"], head), (head, head)):
        before = [m["id"] for m in api[base]["messages"]]
        after = [m["id"] for m in api[target]["messages"]]
        ids, channels = _diff(staff_client, thread_id, base, target)
        assert ids["added"] == [i for i in after if i not in before]
        assert ids["removed"] == [i for i in before if i not in after]
        assert ids["changed"] == []
        assert channels == sorted(k for k in set(api[base]) | set(api[target])
                                  if k != "messages" and api[base].get(k) != api[target].get(k))
    ids, _ = _diff(staff_client, thread_id, tip, head)
    assert ids["added"] and ids["removed"]  # two branches: each has messages the other lacks


def test_diff_shows_a_changed_message_and_channels(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    thread_id = "full-title-artifacts-todos"
    cps = oracle.root_checkpoints(thread_id, "sqlite")
    ids, channels = _diff(staff_client, thread_id, cps[-1]["checkpoint_id"], cps[0]["checkpoint_id"])
    assert len(ids["added"]) == oracle.thread(thread_id)["backends"]["sqlite"]["head"]["message_count"]
    assert {"title", "todos"} <= set(channels)


def test_pending_writes_by_task(sqlite_fixture_db, sqlite_fixture_dir, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    import sqlite3

    thread_id = "delta-f10-fork"
    with sqlite3.connect(sqlite_fixture_dir / "deerflow.db") as db:
        # The checkpoint with the most tasks that wrote from it (read straight from LangGraph's table).
        (checkpoint_id,) = db.execute(
            "select checkpoint_id from writes where thread_id=? and checkpoint_ns='' group by checkpoint_id "
            "order by count(distinct task_id) desc, count(*) desc, checkpoint_id limit 1", (thread_id,)).fetchone()
        stored = db.execute("select task_id, channel from writes where thread_id=? and checkpoint_ns='' "
                            "and checkpoint_id=? order by task_id, idx", (thread_id, checkpoint_id)).fetchall()
    cp = {"checkpoint_id": checkpoint_id}
    assert stored
    doc = parse(staff_client.get(page_url(thread_id), {"checkpoint_id": cp["checkpoint_id"]}).content)
    section = doc.find("section", id="writes")
    shown = []
    for task in section.find_all("details", cls="task-writes"):
        task_id = task.find("summary").find("code").text
        shown += [(task_id, w.find("code", cls="channel-name").text) for w in task.find_all("div", cls="write")]
    assert sorted(shown) == sorted(stored)


def test_console_pages_escape_untrusted_content(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    thread_id = "delta-f10-untrusted-content"
    cps = oracle.root_checkpoints(thread_id, "sqlite")
    urls = [({"q": "script"}), ({"view": "message", "index": "0"}),
            ({"view": "diff", "base": cps[-1]["checkpoint_id"]}), ({"role": "human"})]
    for query in urls:
        html = staff_client.get(page_url(thread_id), query).content.decode()
        for raw in ("<script>alert", "<img src=x onerror", "<iframe", "<b>markup</b>"):
            assert raw not in html, (query, raw)
    hits = parse(staff_client.get(page_url(thread_id), {"q": "<script>"}).content).find_all("mark")
    assert hits and all(h.text == "<script>" for h in hits)
