"""Confirmations, banners and dismissals in Debian's Chromium on the real fixture (issue 14's acceptance for
items 3 and 5): a confirmation page before a bulk conversion, a revert from the backups page, a dismissed
stale process, and the drift banner on the list page.

* a finished dry run over four delta threads links to its confirmation page; the page lists exactly the
  threads the dry run found convertible with their growth; its button starts the conversion and the
  browser lands on the new job's page (a GET URL: a reload answers 200, not 405) once a worker is registered;
  with no live worker the button is refused at launch (503) with the reason and the command that starts one;
* a converted thread's backup has a Revert… link on the backups page; the confirmation names the thread;
  the button starts a revert job of that backup only and lands on its page; run, the backup is restored;
* the old row of a restarted process (same host, role and config, newer start) shows as "restarted" on
  the audit page; Dismiss posts, lands back on /audit/, and the row says who dismissed it;
* config.yaml edited under the running server: the next list page carries the drift banner; restored,
  the banner goes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.test_browser import (  # noqa: F401  (browser is a fixture)
    USERNAME,
    Server,
    _login,
    _start_server,
    browser,
    probed_page,
    pytestmark,
)
from tests.browser.test_console import _shot
from tests.integration import helpers

DRY_RUN_THREADS = ["delta-f10-1t", "delta-f10-9t", "delta-f10-10t", "delta-f10-fork"]


class Home:
    """The server plus what the tests need beside it: its config.yaml and a ``manage.py`` environment."""

    def __init__(self, server: Server, root: Path):
        self.server, self.root = server, root
        self.config_path = root / "config.yaml"
        self.env = helpers.dashboard_env(config_path=self.config_path, var_dir=root / "var", DJANGO_DEBUG="0",
                                         DJANGO_SECRET_KEY="test", DJANGO_ALLOWED_HOSTS="127.0.0.1")

    def shell(self, code: str) -> str:
        """Run ``code`` in ``manage.py shell`` against the server's databases; its stdout."""
        return helpers.run_manage(["shell", "-c", code], self.env, timeout=300).stdout


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    root = tmp_path_factory.mktemp("server-confirm")
    server = _start_server(root, "delta")
    try:
        h = Home(server, root)
        h.shell("from django.contrib.auth import get_user_model; from django.contrib.auth.models import Permission; "
                f"u = get_user_model().objects.get(username={USERNAME!r}); "
                "u.user_permissions.add(*Permission.objects.filter("
                "codename__in=['manage_conversions', 'dismiss_process']))")
        yield h
    finally:
        server.proc.stop()


@pytest.fixture
def page(browser, tmp_path: Path) -> Iterator:  # noqa: F811
    with probed_page(browser, 60_000) as page:
        yield page


def _finished_job(home: Home, kind: str, thread_ids: list[str]) -> dict:
    """A job of ``kind`` over ``thread_ids``, run inline to its end:
    ``{"id", "results": {thread: [status, backup]}}``."""
    out = home.shell(
        "import json; from dashboard.jobs import services; "
        f"job = services.run_inline(services.create_job(None, {kind!r}, {{'thread_ids': {thread_ids!r}}}, "
        "services.JobOptions(launched_by='test', confirmed=True, runner='inline'))); "
        "print(json.dumps({'id': job.pk, "
        "'results': {r.thread_id: [r.status, r.backup_id] for r in job.results.all()}}))")
    return json.loads(out.strip().splitlines()[-1])


def _register_worker(home: Home) -> None:
    """A live worker's registry row (this module runs its jobs inline, as that worker would)."""
    home.shell("from django.utils import timezone; from dashboard.fleet.models import ProcessRecord; "
               "now = timezone.now(); ProcessRecord.objects.update_or_create(instance_id='inline-worker', defaults="
               "dict(role='worker', name='celery@inline', host='h', pid=1, started_at=now, last_heartbeat=now, "
               "heartbeat_interval_s=3600, mode='delta', snapshot_frequency=10, "
               "queues=['dashboard', 'checkpoints.delta']))")


def test_a_confirmation_page_before_a_bulk_conversion(home, page, tmp_path):
    server = home.server
    dry = _finished_job(home, "dry_run", DRY_RUN_THREADS)
    convertible = sorted(t for t, (status, _b) in dry["results"].items() if status == "needs_conversion")
    assert len(convertible) >= 3
    _login(page, server)
    page.goto(server.url(f"/jobs/{dry['id']}/"))
    page.click("#review-conversion")
    page.wait_for_url(server.url(f"/jobs/{dry['id']}/confirm"))
    assert page.locator("h1").inner_text() == f"Convert {len(convertible)} threads to full?"
    listed = page.locator("#confirm-threads tr[data-thread-id]").evaluate_all(
        "rows => rows.map(r => r.dataset.threadId)")
    assert sorted(listed) == convertible
    assert all(g.startswith("× ") for g in page.locator("#confirm-threads td:nth-child(5)").all_inner_texts())
    assert "until the backup is purged" in page.locator("#conversion-summary").inner_text()
    _shot(page, tmp_path, "convert-confirm")
    button = f"#confirm-convert button:text('Convert {len(convertible)} threads to full')"
    # No worker runs here: refused at launch with the reason and the command, never queued to wait.
    with page.expect_response(lambda r: r.request.method == "POST") as refused:
        page.click(button)
    assert refused.value.status == 503
    text = page.locator("main").inner_text()
    assert "No Celery worker has sent a heartbeat" in text and "celery -A dashboard worker -Q dashboard" in text
    _register_worker(home)
    page.goto(server.url(f"/jobs/{dry['id']}/confirm"))
    page.click(button)
    page.wait_for_url(lambda url: url.rstrip("/").split("/")[-1].isdigit() and f"/{dry['id']}/" not in url)
    job_url = page.url
    assert page.locator("h1").inner_text().endswith("convert to full")
    assert page.reload().status == 200 and page.url == job_url  # a GET URL: no 405 on reload


def test_a_revert_from_the_backups_page(home, page):
    server = home.server
    _register_worker(home)
    converted = _finished_job(home, "convert", ["delta-f10-9t"])
    status, backup_id = converted["results"]["delta-f10-9t"]
    assert status == "converted" and backup_id
    _login(page, server)
    page.click("header nav a:text('Backups')")
    page.wait_for_url(server.url("/jobs/backups/"))
    page.click(f"#backups tr[data-backup-id='{backup_id}'] a.revert")
    page.wait_for_url(lambda url: "/jobs/backups/revert?backup_id=" in url)
    assert "delta-f10-9t" in page.locator("#revert-confirm").inner_text()
    page.click("#revert-form button")
    page.wait_for_url(lambda url: url.rstrip("/").split("/")[-1].isdigit())
    revert_id = int(page.url.rstrip("/").split("/")[-1])
    assert page.locator("h1").inner_text() == f"Job #{revert_id} · revert"
    out = home.shell("import json; from dashboard.jobs import services; "
                     "from dashboard.jobs.models import ConversionJob; "
                     f"job = services.run_inline(ConversionJob.objects.get(pk={revert_id})); "
                     "print(json.dumps([job.state, job.selection]))")
    assert json.loads(out.strip().splitlines()[-1]) == ["succeeded", {"backup_ids": [backup_id]}]
    page.goto(server.url("/jobs/backups/"))
    row = page.locator(f"#backups tr[data-backup-id='{backup_id}']")
    assert "active" not in row.locator("td:nth-child(6)").inner_text() and row.locator("a.revert").count() == 0


def test_a_dismissed_restarted_process(home, page, tmp_path):
    server = home.server
    home.shell(
        "import datetime as dt; from django.utils import timezone; from dashboard.fleet.models import ProcessRecord; "
        "now = timezone.now(); "
        "common = dict(role='worker', host='old-host', pid=7, mode='delta', snapshot_frequency=10, "
        "config_path='/srv/config.yaml', config_sha256='c' * 64, queues=['dashboard', 'checkpoints.delta']); "
        "ProcessRecord.objects.create(instance_id='before-restart', name='celery@old-host (before)', "
        "started_at=now - dt.timedelta(hours=3), last_heartbeat=now - dt.timedelta(hours=1), **common); "
        "ProcessRecord.objects.create(instance_id='after-restart', name='celery@old-host (after)', "
        "started_at=now - dt.timedelta(minutes=30), last_heartbeat=now, heartbeat_interval_s=3600, **common)")
    _login(page, server)
    page.click("header nav a:text('Fleet audit')")
    page.wait_for_url(server.url("/audit/"))
    old = page.locator("#processes tr[data-instance-id='before-restart']")
    assert "restarted (replaced by celery@old-host (after))" in old.locator("td.process-state").inner_text()
    assert page.locator(".finding[data-code='restarted_process']").count() == 1
    assert page.locator(".finding[data-code='process_gone']").count() == 0
    assert (page.locator("#census-chart g.bar").count() == 5
            and page.locator("#storage-by-mode-chart g.bar").count() == 2)
    _shot(page, tmp_path, "audit-restarted-process", full_page=True)
    old.locator("form.dismiss button").click()
    page.wait_for_url(server.url("/audit/"))
    old = page.locator("#processes tr[data-instance-id='before-restart']")
    assert old.locator("td.process-state").inner_text().startswith(f"dismissed by {USERNAME}")
    assert page.locator(".finding[data-code='restarted_process']").count() == 0
    assert old.locator("form.dismiss").count() == 0


def test_the_drift_banner_on_the_list_page(home, page, tmp_path):
    server = home.server
    _login(page, server)
    assert page.locator("#banners .banner[data-code='config_drift']").count() == 0
    original = home.config_path.read_text()
    try:
        home.config_path.write_text(original.replace("checkpoint_channel_mode: delta", "checkpoint_channel_mode: full"))
        assert home.config_path.read_text() != original
        page.goto(server.url("/threads/"))
        banner = page.locator("#banners .banner[data-code='config_drift']")
        assert banner.count() == 1
        text = banner.inner_text()
        assert "checkpoint_channel_mode delta (frozen) ≠ full (on disk)" in text and "Fleet audit" in text
        assert banner.evaluate("el => getComputedStyle(el).borderLeftStyle") == "solid"
        _shot(page, tmp_path, "banner-config-drift")
    finally:
        home.config_path.write_text(original)
    page.goto(server.url("/threads/"))
    assert page.locator("#banners .banner[data-code='config_drift']").count() == 0
