"""Every page in Debian's Chromium, read as an operator reads it: no raw ISO timestamp, no count over 999
without its thousands separator, and no Content-Security-Policy violation reported by Chromium.

The pages are those of a delta-mode server on the real fixture (its 1,200-checkpoint, 1,050-message thread
gives four-digit numbers) with one job of every kind run to its end (a dry run, a conversion and its backup,
a compaction dry run, a prune dry run, a reclaim), plus a full-mode server's 409 page and a drifted server's
503 page. Text inside ``<code>``, ``<pre>``, ``<time>`` (its exact instant is the tooltip) and form fields is
not prose: identifiers (checkpoint ids, digests, pids) are shown as they are stored; nor is what threads
hold (message contents and channel values: the untrusted data, shown exactly as DeerFlow stored it).
"""

from __future__ import annotations

import json
import re
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
from tests.integration import helpers

LONGEST = "delta-f100-150t"
#: An ISO 8601 instant as Python writes it (``2026-12-05T15:15:53.476874+00:00``).
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
#: A run of four or more digits that is a count, not part of an identifier, a date, a time or a decimal.
BARE_COUNT = re.compile(r"(?<![\w.,:/#@×-])\d{4,}(?![\w.,:/-])")
#: The page's prose: its text without identifiers and machine values.
PROSE_JS = """() => {
  const labels = [...document.querySelectorAll('svg text')].map(t => t.textContent);  // one label a line
  const body = document.body.cloneNode(true);
  body.querySelectorAll('code, pre, time, textarea, input, select, script, style, svg, '
                        + '.message .line, .message .content, .message .meta, .tool-call').forEach(e => e.remove());
  return body.innerText + '\\n' + labels.join('\\n');
}"""


class Home:
    """A server and the ``manage.py`` environment beside it."""

    def __init__(self, server: Server, root: Path):
        self.server, self.root = server, root
        self.env = helpers.dashboard_env(config_path=root / "config.yaml", var_dir=root / "var", DJANGO_DEBUG="0",
                                         DJANGO_SECRET_KEY="test", DJANGO_ALLOWED_HOSTS="127.0.0.1")

    def shell(self, code: str) -> str:
        return helpers.run_manage(["shell", "-c", code], self.env, timeout=600).stdout.strip().splitlines()[-1]


def _jobs(home: Home) -> dict[str, int]:
    """One job of every kind, run inline to its end (as a worker would): ``{kind: job id}``."""
    code = (
        "import json; from dashboard.jobs import services, reclaiming; out = {}; "
        "run = lambda kind, ids, **kw: services.run_inline(services.create_job(None, kind, {'thread_ids': ids}, "
        "services.JobOptions(launched_by='test', runner='inline', **kw))); "
        f"out['dry_run'] = run('dry_run', ['delta-f10-9t', 'delta-f10-fork', {LONGEST!r}]).pk; "
        "out['convert'] = run('convert', ['delta-f10-9t'], confirmed=True).pk; "
        "out['compact_dry_run'] = run('compact_dry_run', ['full-tools-30t', 'full-short-3t']).pk; "
        f"out['prune_dry_run'] = run('prune_dry_run', [{LONGEST!r}], retention={{'rule': 'keep_last', "
        "'keep_last': 5}).pk; "
        "out['reclaim'] = services.run_inline(reclaiming.create_reclaim_job(None, runner='inline', "
        "launched_by='test')).pk; "
        "print(json.dumps(out))")
    return json.loads(home.shell(code))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Home, dict[str, int]]]:
    root = tmp_path_factory.mktemp("server-every-page")
    server = _start_server(root, "delta")
    try:
        h = Home(server, root)
        h.shell("from django.contrib.auth import get_user_model; from django.contrib.auth.models import Permission; "
                f"u = get_user_model().objects.get(username={USERNAME!r}); "
                "u.user_permissions.add(*Permission.objects.filter("
                "codename__in=['manage_conversions', 'manage_retention', 'dismiss_process'])); print('ok')")
        yield h, _jobs(h)
    finally:
        server.proc.stop()


def _pages(jobs: dict[str, int]) -> list[str]:
    pages = ["/threads/", "/threads/?mode=delta&q=f10", "/threads/?sort=bytes", f"/threads/{LONGEST}/",
             f"/threads/{LONGEST}/?page=2", f"/threads/{LONGEST}/?q=the", f"/history/{LONGEST}/",
             f"/threads/{LONGEST}/?fragment=storage", "/threads/delta-f10-fork/", "/threads/full-tools-30t/",
             "/jobs/", "/jobs/backups/", "/jobs/policies/", "/jobs/policies/new", "/jobs/workers", "/audit/",
             "/accounts/tokens/", f"/jobs/{jobs['dry_run']}/confirm", f"/jobs/{jobs['compact_dry_run']}/confirm",
             f"/jobs/{jobs['prune_dry_run']}/prune/confirm", f"/jobs/{jobs['convert']}/revert", "/jobs/reclaim"]
    return pages + [f"/jobs/{job_id}/" for job_id in jobs.values()]


def _read(page, url: str) -> list[str]:
    """Open ``url`` and return what is wrong with its prose (raw ISO instants, bare counts)."""
    response = page.goto(url)
    assert response is not None and response.status in (200, 409, 503), (url, response and response.status)
    page.wait_for_load_state("networkidle")
    prose = page.evaluate(PROSE_JS)
    wrong = [f"{url}: raw ISO timestamp {m.group(0)!r}" for m in ISO.finditer(prose)]
    wrong += [f"{url}: count without separators {m.group(0)!r} in …{prose[max(m.start() - 40, 0):m.end() + 20]!r}…"
              for m in BARE_COUNT.finditer(prose)]
    return wrong


def test_every_page_reads_right_and_reports_no_csp_violation(home, browser):  # noqa: F811
    h, jobs = home
    wrong: list[str] = []
    with probed_page(browser, 120_000) as page:  # fails on any CSP violation Chromium reports
        _login(page, h.server)
        for url in _pages(jobs):
            wrong += _read(page, h.server.url(url))
        assert page.evaluate("() => window.__csp") == []
    assert wrong == [], "\n".join(sorted(set(w.split(" in …")[0] for w in wrong)))


def test_the_409_and_503_pages_read_right_too(browser, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("server-every-page-full")
    server = _start_server(root, "full")
    try:
        with probed_page(browser, 120_000) as page:
            _login(page, server)
            wrong = _read(page, server.url(f"/threads/{LONGEST}/"))  # a delta thread: 409
            config = root / "config.yaml"
            config.write_text(config.read_text().replace("checkpoint_channel_mode: full",
                                                         "checkpoint_channel_mode: delta"))
            wrong += _read(page, server.url("/threads/full-tools-30t/"))  # drifted: 503
            assert page.locator("h1").first.inner_text()
        assert wrong == []
    finally:
        server.proc.stop()
