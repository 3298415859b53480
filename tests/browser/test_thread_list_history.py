"""The thread list's filter form follows the URL, including after the browser's Back button.

The bug (fresh-user trial, Chromium): Sort → size, Next page, Back. The URL said
``sort=bytes`` and the rows were sorted by size, but the sort ``<select>``
showed "last update", because htmx restored its history snapshot (the page's
``innerHTML``, which keeps the server-rendered ``selected`` attribute, not what
the user picked since). Changing the Mode filter then submitted
``sort=updated`` and the size sort was silently lost. The same went for the
other controls (mode, class, the thread-id text box) and for the "Heaviest
threads" link, which swapped the rows to ``?sort=bytes`` under a form that
still showed the previous filters.

The server runs with ``DASHBOARD_PAGE_SIZE=5`` so the 27 fixture threads span
several pages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser.test_browser import (  # noqa: F401  (browser is a fixture)
    CHROMIUM_ARGS,
    PASSWORD,
    USERNAME,
    Server,
    _login,
    _start_server,
    browser,
    pytestmark,
)

PAGE_SIZE = 5
FORM = "form.filters"
# Counts htmx's history restores (from its cache or from the server), so a test can wait for Back to finish.
RESTORE_COUNTER = """
window.__restores = 0;
document.addEventListener('htmx:historyRestore', () => { window.__restores += 1; });
"""


@pytest.fixture(scope="module")
def paged_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = _start_server(tmp_path_factory.mktemp("server-paged"), "delta", DASHBOARD_PAGE_SIZE=str(PAGE_SIZE))
    try:
        yield server
    finally:
        server.proc.stop()


@pytest.fixture
def page(browser, tmp_path: Path):  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(RESTORE_COUNTER)
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    try:
        yield page
        assert errors == [], errors
    finally:
        context.close()


def _query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


def _settled(page) -> None:
    """No htmx request, swap or settle in flight."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')")


def _first_row(page) -> str:
    return page.locator("#thread-table tbody tr[data-thread-id]").first.get_attribute("data-thread-id")


def _back(page) -> None:
    """The browser's Back button, then wait until htmx has restored the page for the previous URL."""
    restores = page.evaluate("() => window.__restores")
    page.go_back()
    page.wait_for_function("n => window.__restores > n", arg=restores)
    _settled(page)


def _wait_for_url(page, predicate_js: str) -> None:
    page.wait_for_function(f"() => {{ const p = new URLSearchParams(location.search); return {predicate_js}; }}")
    _settled(page)


def _controls(page) -> dict[str, str]:
    """What the filter form shows (and would submit)."""
    return {name: page.locator(f"{FORM} [name={name}]").input_value() for name in ("q", "mode", "thread_class", "sort")}


def _rows(page) -> list[tuple[str, str, int]]:
    """(thread id, mode badge, stored bytes) of the rows shown."""
    return page.locator("#thread-table tbody tr[data-thread-id]").evaluate_all(
        "rows => rows.map(r => [r.dataset.threadId, r.querySelector('.badge').textContent.trim(),"
        " Number(r.querySelector('td.bytes').dataset.bytes)])")


def _assert_by_size(page) -> None:
    sizes = [size for _, _, size in _rows(page)]
    assert sizes and sizes == sorted(sizes, reverse=True), sizes
    assert page.locator("#thread-table thead th:has-text('Size')").inner_text() == "Size ▼"


def _next_page_and_back(page) -> None:
    """Click Next page, then the browser's Back button; wait until the first page is shown again."""
    first = _first_row(page)
    page.click("#thread-rows .pager a:text('Next page')")
    page.wait_for_function(
        "first => new URLSearchParams(location.search).has('cursor')"
        " && document.querySelector('#thread-table tbody tr[data-thread-id]').dataset.threadId !== first", arg=first)
    _settled(page)
    _back(page)
    assert _first_row(page) == first


def test_sort_by_size_survives_next_page_and_back(paged_server, page):
    """The trial's exact steps: Sort → size, Next page, Back, then change Mode."""
    _login(page, paged_server)
    assert _controls(page)["sort"] == "updated"

    page.select_option(f"{FORM} select[name=sort]", "bytes")
    _wait_for_url(page, "p.get('sort') === 'bytes'")
    _assert_by_size(page)
    first_page = _rows(page)
    assert len(first_page) == PAGE_SIZE

    _next_page_and_back(page)
    assert _query(page).get("sort") == "bytes" and "cursor" not in _query(page)
    assert _rows(page) == first_page
    _assert_by_size(page)
    assert _controls(page)["sort"] == "bytes", "the sort <select> must show what the URL and the rows say"

    page.select_option(f"{FORM} select[name=mode]", "delta")
    _wait_for_url(page, "p.get('mode') === 'delta'")
    assert _query(page).get("sort") == "bytes", page.url
    rows = _rows(page)
    assert rows and {mode for _, mode, _ in rows} == {"delta"}
    _assert_by_size(page)
    assert _controls(page)["sort"] == "bytes"


def test_every_filter_control_survives_next_page_and_back(paged_server, page):
    _login(page, paged_server)
    page.fill(f"{FORM} input[name=q]", "f10")
    page.press(f"{FORM} input[name=q]", "Enter")
    _wait_for_url(page, "p.get('q') === 'f10'")
    page.select_option(f"{FORM} select[name=mode]", "delta")
    _wait_for_url(page, "p.get('mode') === 'delta'")
    page.select_option(f"{FORM} select[name=thread_class]", "delta")
    _wait_for_url(page, "p.get('thread_class') === 'delta'")
    page.select_option(f"{FORM} select[name=sort]", "checkpoints")
    _wait_for_url(page, "p.get('sort') === 'checkpoints'")
    chosen = {"q": "f10", "mode": "delta", "thread_class": "delta", "sort": "checkpoints"}
    assert _controls(page) == chosen
    first_page = _rows(page)
    assert len(first_page) == PAGE_SIZE and all("f10" in tid for tid, _, _ in first_page)

    _next_page_and_back(page)
    assert {k: _query(page).get(k) for k in chosen} == chosen
    assert _rows(page) == first_page
    assert _controls(page) == chosen

    # A further change submits all the other filters the URL had.
    page.select_option(f"{FORM} select[name=sort]", "bytes")
    _wait_for_url(page, "p.get('sort') === 'bytes'")
    assert {k: _query(page).get(k) for k in chosen} == {**chosen, "sort": "bytes"}
    _assert_by_size(page)

    # Back twice: every control follows each URL.
    _back(page)
    assert {k: _query(page).get(k) for k in chosen} == chosen
    assert _controls(page) == chosen
    _back(page)
    assert {k: _query(page).get(k) for k in chosen} == {**chosen, "sort": "updated"}
    assert _controls(page) == {**chosen, "sort": "updated"}


def test_heaviest_threads_link_leaves_a_form_that_matches_the_url(paged_server, page):
    _login(page, paged_server)
    page.select_option(f"{FORM} select[name=mode]", "full")
    _wait_for_url(page, "p.get('mode') === 'full'")

    page.click(f"{FORM} a:text('Heaviest threads')")
    _wait_for_url(page, "p.get('sort') === 'bytes' && !p.has('mode')")
    _assert_by_size(page)
    assert _controls(page) == {"q": "", "mode": "", "thread_class": "", "sort": "bytes"}

    page.select_option(f"{FORM} select[name=mode]", "delta")
    _wait_for_url(page, "p.get('mode') === 'delta'")
    assert _query(page).get("sort") == "bytes", page.url
    _assert_by_size(page)


def test_controls_follow_the_url_back_from_a_thread_page(paged_server, page):
    """Leaving the list by an ordinary link and coming Back loads (or bfcache-restores) whole documents."""
    _login(page, paged_server)
    page.select_option(f"{FORM} select[name=sort]", "bytes")
    _wait_for_url(page, "p.get('sort') === 'bytes'")
    page.click("#thread-rows .pager a:text('Next page')")
    _wait_for_url(page, "p.has('cursor')")
    page.select_option(f"{FORM} select[name=mode]", "delta")
    _wait_for_url(page, "p.get('mode') === 'delta'")
    listed = page.url

    page.locator("#thread-table tbody tr[data-thread-id] a").first.click()
    page.wait_for_url("**/threads/*/")
    page.go_back()
    page.wait_for_url(listed)
    _settled(page)
    assert _controls(page) == {"q": "", "mode": "delta", "thread_class": "", "sort": "bytes"}

    _back(page)  # to ?sort=bytes&cursor=… (an entry pushed by htmx)
    assert _query(page).get("sort") == "bytes" and "cursor" in _query(page) and not _query(page).get("mode")
    assert _controls(page) == {"q": "", "mode": "", "thread_class": "", "sort": "bytes"}
    _assert_by_size(page)
