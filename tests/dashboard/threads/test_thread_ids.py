"""Thread ids with slashes, spaces, unicode, dot segments and markup: every page and API route resolves.

The threads are written by a real LangGraph graph into a private SQLite copy
(:mod:`tests.dashboard.writes`). Links are followed the way a browser does:
the WHATWG URL parser collapses ``.`` and ``..`` path segments, percent-encoded
ones (``%2e``) included, before the request is sent.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import pytest

from tests.dashboard import oracle
from tests.dashboard.html import parse
from tests.dashboard.writes import write_thread

pytestmark = pytest.mark.django_db

ODD_IDS = [
    "team/alpha/run 1",
    "with space",
    "ünïcødé-线程-🚀",
    "..",
    ".",
    "../../etc/passwd",
    "a/./b",
    "a/../b",
    "%2e%2e",
    "100%",
    "q?x#y&z=1",
    "trailing/",
    "/leading",
    "<script>alert('id')</script>",
]

_SINGLE = {".", "%2e"}
_DOUBLE = {"..", ".%2e", "%2e.", "%2e%2e"}


def browser_path(href: str, base: str = "/threads/") -> str:
    """The path a browser requests for ``href`` on a page at ``base`` (WHATWG dot-segment rules)."""
    parts = urlsplit(href)
    path = parts.path if parts.path.startswith("/") else base.rsplit("/", 1)[0] + "/" + parts.path
    out: list[str] = []
    segments = path.split("/")[1:]
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment.lower() in _DOUBLE:
            if out:
                out.pop()
            if last:
                out.append("")
        elif segment.lower() in _SINGLE:
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out) + (f"?{parts.query}" if parts.query else "")


def test_browser_path_model():
    assert browser_path("/threads/../") == "/"
    assert browser_path("/threads/%2E%2E/") == "/"
    assert browser_path("/threads/a/./b/") == "/threads/a/b/"
    assert browser_path("/threads/..%2F..%2Fx/") == "/threads/..%2F..%2Fx/"


@pytest.fixture
def odd_threads(sqlite_fixture_db_rw, runtime_for):
    for thread_id in ODD_IDS:
        write_thread(sqlite_fixture_db_rw, thread_id, turns=[f"hello {thread_id}", "second turn"])
    write_thread(sqlite_fixture_db_rw, "odd/delta/../thread", mode="delta", turns=["one", "two", "three"])
    runtime_for(sqlite_fixture_db_rw, "delta")
    return [*ODD_IDS, "odd/delta/../thread"]


def _list_links(client) -> dict[str, str]:
    doc = parse(client.get("/threads/", {"limit": 1000}).content)
    return {tr.attrs["data-thread-id"]: tr.find("a").attrs["href"]
            for tr in doc.find_all("tr") if "data-thread-id" in tr.attrs}


def test_every_odd_id_is_listed_and_its_link_opens_it(odd_threads, staff_client):
    links = _list_links(staff_client)
    assert set(odd_threads) <= set(links)
    assert {t["thread_id"] for t in oracle.threads()} <= set(links)
    for thread_id in odd_threads:
        response = staff_client.get(browser_path(links[thread_id]))
        assert response.status_code == 200, (thread_id, links[thread_id])
        doc = parse(response.content)
        assert doc.find("h1", cls="thread-id").text == thread_id
        texts = [li.text for li in doc.find("ol", id="messages").find_all("li", cls="message")]
        assert any(f"hello {thread_id}" in t for t in texts) or thread_id == "odd/delta/../thread"
        assert len(texts) == (6 if thread_id == "odd/delta/../thread" else 4)


def test_history_fragment_and_row_links_resolve_for_odd_ids(odd_threads, staff_client):
    links = _list_links(staff_client)
    for thread_id in odd_threads:
        page_path = browser_path(links[thread_id])
        doc = parse(staff_client.get(page_path).content)
        history_href = doc.find("div", id="history").attrs["hx-get"]
        fragment = staff_client.get(browser_path(history_href, page_path), HTTP_HX_REQUEST="true")
        assert fragment.status_code == 200, (thread_id, history_href)
        rows = parse(fragment.content).find("table", cls="history").find_all("a")
        assert rows, thread_id
        at_checkpoint = staff_client.get(browser_path(rows[-1].attrs["href"], page_path))
        assert at_checkpoint.status_code == 200, (thread_id, rows[-1].attrs["href"])
        assert parse(at_checkpoint.content).find("h1", cls="thread-id").text == thread_id
        assert rows[-1].text in parse(at_checkpoint.content).find("dl", cls="facts").text


@pytest.mark.parametrize("safe", ["/", ""])
def test_api_routes_accept_odd_ids(odd_threads, staff_client, safe):
    for thread_id in odd_threads:
        quoted = quote(thread_id, safe=safe)
        state = staff_client.get(f"/api/threads/{quoted}/state")
        assert state.status_code == 200, thread_id
        body = state.json()
        assert body["thread_id"] == thread_id
        contents = [m["content"] for m in body["values"]["messages"]]
        if thread_id != "odd/delta/../thread":
            assert contents == [f"hello {thread_id}", f"echo: hello {thread_id}", "second turn", "echo: second turn"]
        history = staff_client.get(f"/api/threads/{quoted}/history")
        assert history.status_code == 200, thread_id
        assert [r["checkpoint_id"] for r in history.json()["checkpoints"]][0] == body["checkpoint_id"]


def test_api_list_and_q_filter_with_odd_ids(odd_threads, staff_client):
    listed = {t["thread_id"]: t for t in staff_client.get("/api/threads", {"limit": 1000}).json()["threads"]}
    assert set(odd_threads) <= set(listed)
    assert listed["odd/delta/../thread"]["mode"] == "delta"
    assert listed["with space"]["mode"] == "full"
    assert {t["thread_id"] for t in staff_client.get("/api/threads", {"q": "100%"}).json()["threads"]} == {"100%"}
    assert {t["thread_id"]
            for t in staff_client.get("/api/threads", {"q": "线程"}).json()["threads"]} == {"ünïcødé-线程-🚀"}


def test_markup_in_a_thread_id_is_escaped(odd_threads, staff_client):
    thread_id = "<script>alert('id')</script>"
    for response in (staff_client.get("/threads/"), staff_client.get(f"/threads/{quote(thread_id)}/"),
                     staff_client.get(f"/history/{quote(thread_id)}/")):
        html = response.content.decode("utf-8")
        assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;id&#x27;)&lt;/script&gt;" in staff_client.get("/threads/").content.decode("utf-8")


def test_dot_segment_ids_use_the_query_routes(odd_threads, staff_client):
    links = _list_links(staff_client)
    assert links[".."] == "/thread/?thread_id=.."
    assert links["."] == "/thread/?thread_id=."
    assert links["../../etc/passwd"] == "/threads/..%2F..%2Fetc%2Fpasswd/"
    assert links["with space"] == "/threads/with%20space/"
    assert links["team/alpha/run 1"] == "/threads/team/alpha/run%201/"
    assert staff_client.get("/thread/").status_code == 400
    assert staff_client.get("/history/", {"thread_id": "no-such"}).status_code == 404
