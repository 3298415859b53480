"""Compaction and reclaim in Debian's Chromium on the real fixture (issue 11's acceptance, browser test).

A full thread's page → "Compact to delta…" → the dry run's job page (htmx follows the worker's progress) →
the confirmation page → the compaction's job page (progress until it succeeds) → the backup purged from the
backups page → "Reclaim disk space…" on the compaction's page → the reclaim's confirmation (what VACUUM locks
and the disk it needs) → the reclaim job's page with the file's bytes before and after; the thread list shows
the thread's bytes dropped and the jobs list the file's. A real server and a real delta-mode Celery worker
share the embedded filesystem broker (as ``make demo`` runs them); no dialog, no CSP violation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.test_browser import (  # noqa: F401  (browser is a fixture)
    PASSWORD,
    USERNAME,
    Server,
    browser,
    delta_server_with_worker,
    probed_page,
    pytestmark,
)

THREAD = "full-tools-30t"  # 3.7 MB of full storage in the fixture


@pytest.fixture(scope="module")
def compact_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """A runserver (delta, DEBUG off) whose user may compact, and a delta worker, on one fixture copy."""
    with delta_server_with_worker(tmp_path_factory.mktemp("server-compact"), "manage_conversions") as served:
        yield served


@pytest.fixture
def page(browser) -> Iterator:  # noqa: F811
    with probed_page(browser, 180_000) as page:
        yield page


def _job_id(page) -> int:
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def _wait_state(page, state: str) -> None:
    page.wait_for_function(f"() => document.querySelector('#job-state').textContent.trim() === '{state}'")


def _thread_bytes(page, server: Server) -> int:
    page.goto(server.url("/threads/?mode=&q=" + THREAD))
    return int(page.locator(f"tr[data-thread-id='{THREAD}'] td.bytes").get_attribute("data-bytes"))


def test_compact_a_full_thread_follow_it_reclaim_and_see_the_bytes_drop(compact_server, page):
    server, data_dir = compact_server
    page.goto(server.url("/threads/"))
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("form button[type=submit]")
    page.wait_for_url(server.url("/threads/"))
    before = _thread_bytes(page, server)
    assert before > 3_000_000

    page.goto(server.url(f"/threads/{THREAD}/"))
    page.click("#compact-to-delta button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    dry_id = _job_id(page)
    page.wait_for_selector("#review-compaction", timeout=180_000)  # htmx polls the job page until the worker is done
    assert "answer 409" in page.locator("#compact-estimate").inner_text()
    freed = page.locator("#bytes-freed").inner_text()
    page.click("#review-compaction")
    page.wait_for_url(server.url(f"/jobs/{dry_id}/confirm"))
    assert page.locator("#confirm-freed").inner_text() == freed
    page.click("#confirm-compact button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    compact_id = _job_id(page)
    assert compact_id != dry_id
    page.wait_for_selector("#job-progress")
    _wait_state(page, "Succeeded")  # the progress fragment, polled every 2 s, stops at the end
    assert page.locator(f"#results tr[data-thread-id='{THREAD}']").get_attribute("data-status") == "compacted"
    assert float(page.locator("#job-progress").get_attribute("value")) == 100

    after = _thread_bytes(page, server)  # the thread list: the thread's own bytes dropped
    assert after < before / 2, (before, after)

    page.goto(server.url("/jobs/backups/"))  # the backup still holds the old rows: purge it first
    page.click(f"tr:has(td a:text-is('{THREAD}')) a.purge")
    page.check("#purge-form input[name=confirm]")
    page.click("#purge-form button[type=submit]")
    page.wait_for_url(server.url("/jobs/backups/"))

    page.goto(server.url(f"/jobs/{compact_id}/"))
    page.click("#reclaim-job")
    page.wait_for_url(server.url(f"/jobs/reclaim?source_job={compact_id}"))
    assert page.locator("#reclaim-statement").inner_text() == "VACUUM"
    assert "write lock for its whole duration" in page.locator("#reclaim-lock").inner_text()
    assert "free disk equal to the file" in page.locator("#reclaim-disk").inner_text()
    page.check("#reclaim-form input[name=confirm]")
    page.click("#reclaim-form button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    reclaim_id = _job_id(page)
    _wait_state(page, "Succeeded")
    page.wait_for_selector("#reclaim-after")
    file_before = int(page.locator("#reclaim-before").get_attribute("data-bytes"))
    file_after = int(page.locator("#reclaim-after").get_attribute("data-bytes"))
    assert file_after < file_before - 2_000_000, (file_before, file_after)
    assert file_after == (data_dir / "deerflow.db").stat().st_size  # the WAL is truncated too

    page.goto(server.url("/jobs/"))  # the jobs list: the reclaim's file bytes before -> after
    cell = page.locator(f"tr[data-job-id='{reclaim_id}'] td.job-bytes")
    assert (int(cell.get_attribute("data-before")), int(cell.get_attribute("data-after"))) == (file_before, file_after)
