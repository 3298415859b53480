"""The operator's console in Debian's Chromium, on the real fixture (issue 14's acceptance for items 1, 2, 7).

* the longest thread (``delta-f100-150t``, 1,050 messages): a page under 150 KB,
  every message one collapsed line; a click expands and collapses one, "Expand
  all"/"Collapse all" every one; a search swaps the list by htmx, pushes its
  URL, marks the hits, and "Show in context" opens the page holding the hit
  with that message expanded; the next page of messages comes by htmx;
* the fork thread (``delta-f10-fork``): the history tree shows the fork point,
  the second branch in its own column and its tip; picking *from* and *to*
  and "Compare" opens the diff whose added/removed ids are what the API
  states say; "Older checkpoints" opened on its own (a new tab) is a styled page;
* the thread list says how many threads it lists; in full mode it marks the rows it refuses, and
  each marked row's page answers 409; the API token page creates a token (shown once) and revokes it;
* no dialog, no CSP violation anywhere.

``DFA_SCREENSHOT_DIR=docs/img`` also writes the 1366 px screenshots the README shows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests import fixtures_real
from tests.browser.test_browser import (  # noqa: F401  (browser and delta_server are fixtures)
    _login,
    _sqlite,
    _wait_history,
    browser,
    delta_server,
    full_server,
    probed_page,
    pytestmark,
)

LONGEST = "delta-f100-150t"
FORK = "delta-f10-fork"


@pytest.fixture
def page(browser, tmp_path: Path) -> Iterator:  # noqa: F811
    with probed_page(browser, 60_000) as page:
        yield page


def _shot(page, tmp_path: Path, name: str, full_page: bool = False) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=full_page)
    if target := os.environ.get("DFA_SCREENSHOT_DIR"):
        Path(target).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(target) / f"{name}.png"), full_page=full_page)


def _settled(page) -> None:
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')")


def _open_count(page) -> int:
    return page.evaluate("() => [...document.querySelectorAll('#messages details')].filter(d => d.open).length")


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n\n".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text")


def test_longest_thread_expand_collapse_search_and_paging(delta_server, page, tmp_path):  # noqa: F811
    _login(page, delta_server)
    response = page.goto(delta_server.url(f"/threads/{LONGEST}/"))
    assert response.status == 200
    assert len(response.body()) < 150_000
    messages = fixtures_real.manifest_threads()[LONGEST]["backend_independent"]["head_state"]["messages"]
    assert page.locator("#messages-count").inner_text().startswith("1,050 messages; showing 1–")
    items = page.locator("#messages li.message")
    assert 100 <= items.count() < 110
    assert _open_count(page) == 0
    page.locator("#messages-section").evaluate("el => el.scrollIntoView({block: 'start'})")
    _shot(page, tmp_path, "thread-long-collapsed")

    # One message: a click on its line expands it, a second click collapses it.
    first = page.locator("#m-0")
    body = first.locator(".content").first
    assert not body.is_visible()
    first.locator("summary").click()
    assert body.is_visible() and body.inner_text() == _text(messages[0]["content"])
    first.locator("summary").click()
    assert not body.is_visible()

    # All of them.
    page.click("#messages-section button:text('Expand all')")
    assert _open_count(page) == page.locator("#messages details").count() == items.count()
    _shot(page, tmp_path, "thread-long-expanded")
    page.click("#messages-section button:text('Collapse all')")
    assert _open_count(page) == 0

    # Search, by htmx: the list is swapped, the URL pushed, the hits marked.
    needle = "(turn 14"
    hits = [m["id"] for m in messages if needle in _text(m["content"])]
    page.fill("#messages-section input[name=q]", needle)
    page.press("#messages-section input[name=q]", "Enter")
    page.wait_for_function("() => document.querySelector('#messages-count').textContent.includes('match')")
    _settled(page)
    url = urlsplit(page.url)
    assert url.path == f"/threads/{LONGEST}/" and parse_qs(url.query)["q"] == [needle]
    assert page.locator("#messages-count").inner_text().startswith(f"{len(hits)} of 1,050 messages match")
    assert page.locator("#messages li.message .mid").evaluate_all("els => els.map(e => e.title)") == hits
    assert page.locator("#messages mark").count() == len(hits)
    assert page.locator("#messages mark").first.is_visible()
    page.locator("#messages-section").evaluate("el => el.scrollIntoView({block: 'start'})")
    _shot(page, tmp_path, "thread-long-search")

    # "Show in context": the page of the whole list holding the hit, that message expanded.
    index = next(i for i, m in enumerate(messages) if m["id"] == hits[-1])
    hit = page.locator(f"#m-{index}")
    hit.locator("summary").click()
    hit.locator("a:text('Show in context')").click()
    page.wait_for_url(re.compile(rf".*page=\d+#m-{index}$"))
    target = page.locator(f"#m-{index}")
    target.locator(".content").first.wait_for(state="visible")
    assert page.locator("#messages-count").inner_text().startswith("1,050 messages; showing ")

    # Paging by htmx: the next page replaces the list, and the pushed URL reloads to the same page.
    page.goto(delta_server.url(f"/threads/{LONGEST}/"))
    page.click("#messages-section a[rel=next]")
    page.wait_for_function("() => !document.querySelector('#m-0')")
    _settled(page)
    assert "page=2" in page.url
    shown = page.locator("#messages li.message .mid").evaluate_all("els => els.map(e => e.title)")
    page.reload()
    assert page.locator("#messages li.message .mid").evaluate_all("els => els.map(e => e.title)") == shown
    all_ids = [m["id"] for m in messages]
    start = all_ids.index(shown[0])
    assert start >= 100 and all_ids[start:start + len(shown)] == shown


def test_fork_thread_tree_and_diff(delta_server, page, tmp_path):  # noqa: F811
    _login(page, delta_server)
    page.goto(delta_server.url(f"/threads/{FORK}/"))
    _wait_history(page)
    older = page.locator("#history a:text('Older checkpoints')")
    older_href = older.get_attribute("href")
    older.click()
    page.wait_for_selector("#history tr.fork-point")
    _settled(page)
    checkpoints = [c for c in _sqlite(FORK)["checkpoints"] if c["checkpoint_ns"] == ""]
    parents = [c["parent_checkpoint_id"] for c in checkpoints]
    fork = next(p for p in parents if p and parents.count(p) > 1)
    tip = next(c["checkpoint_id"] for c in checkpoints[1:] if c["checkpoint_id"] not in parents)
    head = checkpoints[0]["checkpoint_id"]
    assert page.locator("#history tr.fork-point").get_attribute("data-checkpoint-id") == fork
    assert page.locator("#history tr.fork-point .tag.fork").inner_text() == "fork: 2 branches"
    assert page.locator("#history tr.branch-tip").get_attribute("data-checkpoint-id") == tip
    assert page.locator(f"#history tr[data-checkpoint-id='{tip}']").get_attribute("data-column") == "1"
    assert page.locator("#history tr.kind-snapshot .tag.snapshot").count() == sum(
        c["messages_stored"] == "delta_snapshot" for c in checkpoints)
    page.locator("#history tr.fork-point").evaluate("el => el.scrollIntoView({block: 'center'})")
    _shot(page, tmp_path, "thread-fork-tree")

    # Compare the abandoned branch's tip with the head.
    page.check(f"#history tr[data-checkpoint-id='{tip}'] input[name=base]")
    page.check(f"#history tr[data-checkpoint-id='{head}'] input[name=checkpoint_id]")
    page.click("#diff-form button[type=submit]")
    page.wait_for_selector("#diff-summary")
    assert "view=diff" in page.url

    def ids(cid: str) -> list[str]:
        state = page.request.get(delta_server.url(f"/api/threads/{FORK}/state?checkpoint_id={cid}")).json()
        return [m["id"] for m in state["values"]["messages"]]

    before, after = ids(tip), ids(head)
    added = [i for i in after if i not in before]
    removed = [i for i in before if i not in after]
    assert added and removed
    summary = page.locator("#diff-summary").inner_text()
    assert summary.startswith(f"{len(added)} added · {len(removed)} removed · 0 changed")
    assert page.locator("#diff-added .mid").evaluate_all("els => els.map(e => e.title)") == added
    assert page.locator("#diff-removed .mid").evaluate_all("els => els.map(e => e.title)") == removed
    _shot(page, tmp_path, "thread-fork-diff", full_page=True)

    # "Older checkpoints" opened in a new tab: the whole styled page, not a bare fragment.
    response = page.goto(delta_server.url(older_href))
    assert response.status == 200
    assert page.locator("header.top nav").is_visible()
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"
    assert page.locator("table.history tr.fork-point").count() == 1


def test_full_mode_list_marks_refused_rows_and_token_page(full_server, page, tmp_path):  # noqa: F811
    _login(page, full_server)
    page.goto(full_server.url("/threads/?limit=1000"))
    total = len(fixtures_real.manifest_threads())
    assert page.locator("#thread-count").inner_text().startswith(f"{total} threads")
    assert page.locator("header nav a[aria-current=page]").inner_text() == "Threads"
    marked = page.locator("#thread-table tr.refused").evaluate_all("rows => rows.map(r => r.dataset.threadId)")
    assert marked and len(marked) < total
    # The banner counts the same rows (issue 14, item 5: a full-mode fleet that cannot read some threads).
    banner = page.locator("#banners .banner[data-code='full_fleet_unreadable_threads']").inner_text()
    assert f"{len(marked)} delta threads cannot be read by the full-mode process" in banner
    for thread_id in marked[:3]:
        assert page.request.get(full_server.url(f"/threads/{thread_id}/")).status == 409
    page.click("#class-glossary summary")
    _shot(page, tmp_path, "thread-list-full-mode")

    page.click("header nav a:text('API tokens')")
    page.wait_for_url(full_server.url("/accounts/tokens/"))
    page.fill("input[name=name]", "nightly export")
    page.click("form button:text('Create token')")
    page.wait_for_selector("#new-token-value")
    raw = page.locator("#new-token-value").inner_text()
    assert raw.startswith("dfa_") and page.url == full_server.url("/accounts/tokens/")
    assert page.request.get(full_server.url("/api/threads"), headers={"Authorization": f"Bearer {raw}"}).status == 200
    _shot(page, tmp_path, "api-tokens")
    page.reload()
    assert page.locator("#new-token-value").count() == 0  # shown once
    page.click("#tokens tr.active button:text('Revoke')")
    page.wait_for_selector("#tokens tr.revoked")
    fresh = page.context.browser.new_context()
    try:
        assert fresh.request.get(full_server.url("/api/threads"),
                                 headers={"Authorization": f"Bearer {raw}"}).status == 401
    finally:
        fresh.close()
