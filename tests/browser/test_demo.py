"""``make demo`` (scripts/demo.sh) in Debian's Chromium, the operator's flows end to end on the embedded default
(SQLite checkpoints, SQLite dashboard database, Celery's filesystem broker):

* while the demo runs in delta mode, config.yaml is switched to full under it: a "Convert to full…" launched
  from a thread page opened before the edit is refused with the thread pages' 503 and its hint, and no job
  is created;
* Ctrl-C stops the demo: every process it started deregistered (its registry row is marked stopped);
* ``make demo`` again, now in full mode: no banner speaks of the stopped processes (no "differs", no
  "mid mode-flip", no gone process on the audit), the worker is listed as maintenance;
* the 409 remedy runs to the end: a delta thread answers 409, its "Convert to full…" dry run runs on the
  demo's worker (which froze delta whatever config.yaml says), the confirmation starts the conversion, it
  succeeds, and the thread opens without a 409.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.test_browser import browser, probed_page, pytestmark  # noqa: F401  (browser is a fixture)
from tests.browser.test_console import _shot
from tests.integration import helpers

THREAD = "delta-f10-9t"
START_TIMEOUT = 600  # a cold start migrates and unpacks the fixture on a loaded 2-core machine


class Demo:
    """``scripts/demo.sh`` in its own process group on a private var directory and port."""

    def __init__(self, root: Path):
        self.var = root / "var-demo"
        self.var.mkdir(parents=True, exist_ok=True)
        self.port = helpers.free_port()
        self.env = helpers.dashboard_env(config_path=self.var / "config.yaml", var_dir=self.var, DJANGO_DEBUG="0",
                                         PORT=str(self.port))
        self.proc: helpers.ManagedProcess | None = None
        self.runs = 0

    @property
    def config(self) -> Path:
        return self.var / "config.yaml"

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        self.runs += 1
        self.proc = helpers.ManagedProcess.start(
            "make demo", ["bash", str(helpers.REPO_ROOT / "scripts" / "demo.sh")], self.env,
            self.var.parent / f"demo-{self.runs}.log")
        helpers.wait_http(self.url("/accounts/login/"), self.proc, timeout=START_TIMEOUT)
        helpers.wait_until(lambda: any(r[1] == "worker" and r[2] is None for r in self.registry()),
                           timeout=START_TIMEOUT, proc=self.proc, what="the demo's worker registered")

    def ctrl_c(self) -> int:
        """What Ctrl-C in the demo's terminal does: SIGINT to its process group; the script's exit status."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.popen.wait(timeout=120)
        except subprocess.TimeoutExpired as exc:
            raise self.proc.fail("the demo did not stop within 120 s of Ctrl-C") from exc
        finally:
            self.proc.stop()

    def registry(self) -> list[tuple]:
        """``(name, role, stopped_at)`` of every registered process."""
        with sqlite3.connect(self.var / "dash.sqlite3") as conn:
            return conn.execute("SELECT name, role, stopped_at FROM fleet_processrecord").fetchall()

    def jobs(self) -> int:
        with sqlite3.connect(self.var / "dash.sqlite3") as conn:
            return conn.execute("SELECT COUNT(*) FROM jobs_conversionjob").fetchone()[0]

    def login(self, page) -> None:
        page.goto(self.url("/threads/"))
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", (self.var / "demo-admin-password").read_text().strip())
        page.click("form button[type=submit]")
        page.wait_for_url(self.url("/threads/"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    d = Demo(tmp_path_factory.mktemp("demo"))
    try:
        yield d
    finally:
        if d.proc is not None:
            d.proc.stop()


def _set_mode(config: Path, mode: str) -> None:
    text = config.read_text()
    config.write_text(re.sub(r"checkpoint_channel_mode: \w+", f"checkpoint_channel_mode: {mode}", text))


def _wait_state(page, state: str) -> None:
    page.wait_for_function(f"() => document.querySelector('#job-state').textContent.trim() === '{state}'")


def test_the_demo_flows_end_to_end(demo, browser, tmp_path):  # noqa: F811
    demo.start()
    with probed_page(browser, 300_000) as page:
        demo.login(page)
        page.goto(demo.url(f"/threads/{THREAD}/"))
        _set_mode(demo.config, "full")  # drift under the running web process
        with page.expect_response(lambda r: r.request.method == "POST") as launch:
            page.click("#convert-to-full button[type=submit]")
        assert launch.value.status == 503
        text = page.locator("main").inner_text()
        assert "checkpoint_channel_mode is restart-required and cannot change in a running process" in text
        assert "Restart this process" in text
        _shot(page, tmp_path, "launch-refused-during-drift")
    assert demo.jobs() == 0

    assert demo.ctrl_c() in (0, 130, 143)
    rows = demo.registry()
    assert {r[1] for r in rows} == {"web", "worker"} and all(r[2] is not None for r in rows), rows

    demo.start()  # now in full mode
    with probed_page(browser, 300_000) as page:
        demo.login(page)
        codes = page.locator("#banners .banner").evaluate_all("els => els.map(e => e.dataset.code)")
        assert set(codes) <= {"full_fleet_unreadable_threads"}, codes  # the full web process refuses delta threads
        banners = page.locator("body").inner_text()
        assert "mid mode-flip" not in banners and "differ" not in banners
        page.goto(demo.url("/audit/"))
        findings = page.locator(".finding").evaluate_all("els => els.map(e => e.dataset.code)")
        assert not {"mode_mismatch", "config_drift", "process_gone", "restarted_process"} & set(findings), findings
        worker = page.locator("#processes tr.state-live", has_text="maintenance")
        assert worker.count() == 1 and "delta" in worker.inner_text()

        response = page.goto(demo.url(f"/threads/{THREAD}/"))
        assert response is not None and response.status == 409
        _shot(page, tmp_path, "remedy-409")
        page.click("#convert-to-full button[type=submit]")
        page.wait_for_url(re.compile(r"/jobs/\d+/$"))
        page.wait_for_selector("#review-conversion", timeout=300_000)  # the worker ran the dry run
        page.click("#review-conversion")
        page.wait_for_url(re.compile(r"/jobs/\d+/confirm$"))
        page.click("#confirm-convert button[type=submit]")
        page.wait_for_url(re.compile(r"/jobs/\d+/$"))
        _wait_state(page, "Succeeded")
        totals = page.locator("#job-totals").inner_text()
        assert re.match(r"[\d,]+ checkpoints? rewritten", totals), totals
        response = page.goto(demo.url(f"/threads/{THREAD}/"))
        assert response is not None and response.status == 200
        assert page.locator("#messages").count() == 1
    assert demo.ctrl_c() in (0, 130, 143)
    assert all(r[2] is not None for r in demo.registry())
