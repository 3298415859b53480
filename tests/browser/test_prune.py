"""Pruning in Debian's Chromium on the real fixture (issue 12, item 3): "Prune history…" on a thread page →
the dry run's job page (kept, deleted, protected and why) → the confirmation page (the blast radius) → the prune's
job page; the tree drawn with the dry run's marks. A real server and a real delta-mode Celery worker share the
embedded filesystem broker (as ``make demo`` runs them); no dialog, no CSP violation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.storage.savers import open_checkpointer
from tests.browser.test_browser import (  # noqa: F401  (browser is a fixture)
    PASSWORD,
    USERNAME,
    Server,
    browser,
    delta_server_with_worker,
    probed_page,
    pytestmark,
)

THREAD = "delta-f10-9t"


@pytest.fixture(scope="module")
def prune_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """A runserver (delta, DEBUG off) whose user may prune, and a delta worker, on one fixture copy."""
    with delta_server_with_worker(tmp_path_factory.mktemp("server-prune"), "manage_retention") as served:
        yield served


@pytest.fixture
def page(browser) -> Iterator:  # noqa: F811
    # A worker runs both jobs; under a loaded -n 4 suite 90 s was not enough.
    with probed_page(browser, 180_000) as page:
        yield page


def _count(data_dir: Path) -> int:
    with open_checkpointer(DatabaseConfig(backend="sqlite", sqlite_dir=str(data_dir))) as saver:
        return len(list(saver.list({"configurable": {"thread_id": THREAD}})))


def test_prune_dry_run_confirmation_and_job_page(prune_server, page):
    server, data_dir = prune_server
    before = _count(data_dir)
    page.goto(server.url("/threads/"))
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("form button[type=submit]")
    page.wait_for_url(server.url("/threads/"))
    assert page.locator("#prune-matching").count() == 1  # the filtered list offers it too

    page.goto(server.url(f"/threads/{THREAD}/"))
    page.fill("#prune-history input[name=keep_last]", "3")
    page.click("#prune-history button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    dry_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    page.wait_for_selector("#prune-confirm-link")  # htmx polls the job page until the worker finished
    preview = page.locator("#prune-preview")
    assert "head: the latest resumable state" in preview.inner_text()
    row = preview.locator(f"tr[data-thread-id='{THREAD}']")
    assert row.get_attribute("data-status") == "would_prune"
    deleted = int(row.locator("td.prune-deleted").inner_text().split()[0])
    kept = int(row.locator("td.prune-kept").inner_text())
    assert kept + deleted == before and deleted > 0 and _count(data_dir) == before  # nothing written yet

    page.goto(server.url(f"/threads/{THREAD}/?prune_job={dry_id}"))  # the tree with the dry run's marks
    page.wait_for_selector("#prune-legend")
    marked = page.locator("[data-prune-mark=deleted]")
    assert marked.count() >= 1 and "prune-deleted" in marked.first.get_attribute("class")
    assert marked.first.inner_text() == "deleted"
    assert page.locator("[data-prune-mark=protected]").first.inner_text() == "protected"

    page.goto(server.url(f"/jobs/{dry_id}/"))
    page.click("#prune-confirm-link")
    page.wait_for_url(server.url(f"/jobs/{dry_id}/prune/confirm"))
    assert f"{deleted} checkpoint" in page.locator("#blast-checkpoints").inner_text()
    assert "cannot be undone" in page.locator("#blast-undo").inner_text()
    page.check("#confirm-prune input[name=understood]")
    page.click("#confirm-prune button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    assert int(page.url.rstrip("/").rsplit("/", 1)[1]) != dry_id
    page.wait_for_function("() => document.querySelector('#job-state').textContent.trim() === 'Succeeded'")
    assert page.locator(f"#prune-threads tr[data-thread-id='{THREAD}']").get_attribute("data-status") == "pruned"
    assert _count(data_dir) == kept

    page.goto(server.url(f"/threads/{THREAD}/?prune_job={dry_id}"))
    page.wait_for_selector("#prune-legend")
    assert page.locator("[data-prune-mark=deleted]").count() == 0  # those rows are gone now: only kept ones draw
    assert page.locator("[data-prune-mark=protected]").count() >= 1
    assert "protected" in page.locator("#prune-legend").inner_text()
