"""Playwright + Debian's Chromium against a real ``manage.py runserver`` process (DEBUG off).

What this proves (issue 2, acceptance "A browser test ... logs in, opens the
list, opens a delta thread and a full thread, and sees the messages; on the
thread with ``<script>`` payloads no script runs"):

* a staff user logs in through the login form of a production-configured
  (``DJANGO_DEBUG=0``) server that froze delta mode from config.yaml at start-up;
* ``/threads/`` lists all 27 fixture threads with the mode badge, mode evidence
  and checkpoint count the manifest implies;
* a delta thread and a full thread show exactly the manifest head's messages
  (count and message ids, in order), and the history table is loaded by htmx
  (and paged by htmx) with the manifest's checkpoint ids;
* on both untrusted-content threads nothing executes: no dialog, no patched
  ``alert``/``confirm``/``prompt`` call, no CSP violation, no ``<script>``,
  ``<img>``, ``<iframe>`` or ``<b>`` element inside ``#messages``, no request
  for the ``<img src=x>`` payload, while the payloads are visible as text; every
  response carries a Content-Security-Policy without ``unsafe-inline``;
* a full-mode server answers the delta thread's page with HTTP 409, the spec's
  exact detail and a remediation hint.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import fixtures_real
from tests.integration import helpers

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
USERNAME, PASSWORD = "browser-staff", "browser-staff-pass-7e1c"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"Debian chromium not found at {CHROMIUM}"),
]

# Runs before any page script: records dialogs-by-API, and CSP violations.
PROBE_SCRIPT = """
window.__xss = [];
window.__csp = [];
for (const name of ['alert', 'confirm', 'prompt']) {
  const original = window[name];
  window[name] = function (...args) { window.__xss.push(name + ':' + args.join(',')); \
return original.apply(this, args); };
}
document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + (e.sample || '')));
"""


class Server:
    """A running dashboard web server."""

    def __init__(self, proc: helpers.ManagedProcess, base_url: str, mode: str):
        self.proc, self.base_url, self.mode = proc, base_url, mode

    def url(self, path: str) -> str:
        return self.base_url + path


def _start_server(root: Path, mode: str, **env_extra: str) -> Server:
    """A migrated runserver on the fixture data in ``mode`` with the test user; ``env_extra`` adds variables."""
    config_path, var_dir = helpers.dashboard_home(root, mode)
    port = helpers.free_port()
    env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir, DJANGO_DEBUG="0",
                                DJANGO_SECRET_KEY="test", DJANGO_ALLOWED_HOSTS="127.0.0.1", **env_extra)
    helpers.run_manage(["migrate", "--noinput"], env)
    helpers.run_manage(["shell", "-c", (
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_user({USERNAME!r}, password={PASSWORD!r}, is_staff=True)"
    )], env)
    proc = helpers.ManagedProcess.start(
        f"runserver ({mode})", [helpers.PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        env, root / "server.log")
    server = Server(proc, f"http://127.0.0.1:{port}", mode)
    try:
        helpers.wait_http(server.url("/accounts/login/"), proc, timeout=90)
    except BaseException:
        proc.stop()
        raise
    return server


@pytest.fixture(scope="module")
def delta_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = _start_server(tmp_path_factory.mktemp("server-delta"), "delta")
    try:
        yield server
    finally:
        server.proc.stop()


@pytest.fixture(scope="module")
def full_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = _start_server(tmp_path_factory.mktemp("server-full"), "full")
    try:
        yield server
    finally:
        server.proc.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def probed_page(browser, timeout_ms: int = 60_000) -> Iterator:
    """A page at 1366 px in a fresh context with the probes, failing the test on a dialog, XSS or CSP report."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    context.add_init_script(PROBE_SCRIPT)
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        yield page
        assert dialogs == []
        assert page.evaluate("() => ({xss: window.__xss, csp: window.__csp})") == {"xss": [], "csp": []}
    finally:
        context.close()


@contextmanager
def delta_server_with_worker(root: Path, permission: str) -> Iterator[tuple[Server, Path]]:
    """A runserver (delta, DEBUG off) whose staff user holds ``jobs.<permission>``, and a delta-mode Celery
    worker, on one fixture copy under ``root``; yields ``(server, data_dir)`` and stops both after."""
    config_path, var_dir = helpers.dashboard_home(root, "delta")
    port = helpers.free_port()
    env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir, DJANGO_DEBUG="0",
                                DJANGO_SECRET_KEY="test", DJANGO_ALLOWED_HOSTS="127.0.0.1")
    helpers.run_manage(["migrate", "--noinput"], env)
    helpers.run_manage(["shell", "-c", (
        "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Permission; "
        f"u = get_user_model().objects.create_user({USERNAME!r}, password={PASSWORD!r}, is_staff=True); "
        f"u.user_permissions.add(Permission.objects.get(codename={permission!r}))")], env)
    worker = helpers.ManagedProcess.start(
        "celery worker (delta)", [str(helpers.VENV_BIN / "celery"), "-A", "dashboard", "worker", "--loglevel=INFO",
                                  "--concurrency=1", "--pool=prefork", "-Q", "dashboard", "--without-heartbeat"],
        env, root / "worker.log")
    proc = None
    try:
        helpers.wait_for_log(worker, r"^.*\] (\S+@\S+) ready\.$", timeout=90)
        proc = helpers.ManagedProcess.start(
            "runserver (delta)", [helpers.PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            env, root / "server.log")
        server = Server(proc, f"http://127.0.0.1:{port}", "delta")
        helpers.wait_http(server.url("/accounts/login/"), proc, timeout=90)
        yield server, root / "data"
    finally:
        if proc is not None:
            proc.stop()
        worker.stop()


class Watched:
    """A page plus everything suspicious it did: dialogs, console errors, requests."""

    def __init__(self, page, shots: Path):
        self.page, self.shots = page, shots
        self.dialogs: list[str] = []
        self.console_errors: list[str] = []
        self.requests: list[str] = []
        page.on("dialog", self._on_dialog)
        page.on("console", lambda msg: msg.type == "error" and self.console_errors.append(msg.text))
        page.on("request", lambda req: self.requests.append(req.url))

    def _on_dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def shot(self, name: str, full_page: bool = False) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def probes(self) -> dict:
        return self.page.evaluate("() => ({xss: window.__xss, csp: window.__csp})")


def _login(page, server: Server) -> None:
    page.goto(server.url("/threads/"))
    assert "/accounts/login/" in page.url, page.url
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("form button[type=submit]")
    page.wait_for_url(server.url("/threads/"))


@pytest.fixture
def watched(browser, tmp_path: Path):
    """A fresh browser context (own cookies) with the probes installed."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(PROBE_SCRIPT)
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        yield Watched(page, tmp_path)
    finally:
        context.close()


def _sqlite(thread_id: str) -> dict:
    return fixtures_real.manifest_threads()[thread_id]["backends"]["sqlite"]


def _expected_mode(thread: dict) -> tuple[str, str]:
    """(mode badge, evidence text) the list should show, from the manifest's marker facts."""
    summary = thread["backend_independent"]["marker_summary"]
    if summary["with_delta_marker"]:
        return "delta", "DeerFlow marker"
    if summary["with_counters_since_delta_snapshot"]:
        return "delta", "LangGraph counters only"
    return "full", ""


def _assert_csp(response) -> None:
    csp = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in csp, csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, csp


def _wait_history(page) -> None:
    page.wait_for_selector("#history table.history tbody tr")


def test_login_and_thread_list(delta_server, watched):
    page = watched.page
    _login(page, delta_server)
    response = page.reload()
    assert response.status == 200
    _assert_csp(response)
    assert page.locator("header .process .badge").inner_text() == "delta"

    rows = page.locator("#thread-table tbody tr[data-thread-id]")
    threads = fixtures_real.manifest_threads()
    assert rows.count() == len(threads) == 27
    seen = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        evidence = row.locator(".evidence")
        seen[row.get_attribute("data-thread-id")] = (
            row.locator(".badge").inner_text(),
            evidence.inner_text() if evidence.count() else "",
            int(row.locator("td.num.checkpoints").inner_text().replace(",", "")),
        )
    expected = {tid: (*_expected_mode(t), _sqlite(tid)["checkpoint_count"]) for tid, t in threads.items()}
    assert seen == expected
    watched.shot("thread-list", full_page=True)
    assert watched.dialogs == [] and watched.probes() == {"xss": [], "csp": []}


@pytest.mark.parametrize("thread_id", ["delta-f10-9t", "full-tools-30t"])
def test_thread_page_shows_manifest_messages_and_htmx_history(delta_server, watched, thread_id):
    page = watched.page
    _login(page, delta_server)
    page.click(f"#thread-table a:text-is('{thread_id}')")
    page.wait_for_url(delta_server.url(f"/threads/{thread_id}/"))
    response = page.reload()
    assert response.status == 200
    _assert_csp(response)

    backend = _sqlite(thread_id)
    head = backend["head"]
    assert page.locator(".facts dd code").first.inner_text() == head["checkpoint_id"]
    # One line per message, a page at a time (100 messages; the next page comes by htmx).
    head_state = fixtures_real.manifest_threads()[thread_id]["backend_independent"]["head_state"]
    shown_ids = page.locator("#messages li.message .mid").evaluate_all("els => els.map(e => e.title)")
    while page.locator("#messages-section a[rel=next]").count():
        page.locator("#messages-section a[rel=next]").click()
        page.wait_for_function("n => !document.querySelector(`#m-${n}`)", arg=len(shown_ids) - 1)
        shown_ids += page.locator("#messages li.message .mid").evaluate_all("els => els.map(e => e.title)")
    assert len(shown_ids) == head["message_count"]
    assert shown_ids == [m["id"] for m in head_state["messages"]]
    if head["message_count"] > 100:  # paged: the pushed URL names the page; restore the first page
        assert "page=2" in page.url
        page.goto(delta_server.url(f"/threads/{thread_id}/"))

    # History arrives through htmx (hx-trigger=load), 25 rows a page, newest first.
    _wait_history(page)
    root_ids = [c["checkpoint_id"] for c in backend["checkpoints"] if c["checkpoint_ns"] == ""]
    rows = page.locator("#history table.history tbody tr")
    assert rows.count() == min(25, len(root_ids))
    assert rows.first.locator("td:nth-child(2) code").inner_text() == head["checkpoint_id"]
    while page.locator("#history a:text('Older checkpoints')").count():
        before = rows.count()
        page.locator("#history a:text('Older checkpoints')").last.click()
        page.wait_for_function(f"() => document.querySelectorAll('#history table.history tbody tr').length > {before}")
        if rows.count() >= 75:  # long threads: two htmx pages are proof enough
            break
    shown = rows.locator("td:nth-child(2) > a code").all_inner_texts()
    assert shown == root_ids[: len(shown)]
    if len(root_ids) <= 75:
        assert len(shown) == len(root_ids)
    assert page.url == delta_server.url(f"/threads/{thread_id}/"), "htmx paging must not navigate"
    watched.shot(f"thread-{thread_id}")
    assert watched.dialogs == [] and watched.probes() == {"xss": [], "csp": []}


@pytest.mark.parametrize("thread_id", ["full-untrusted-content", "delta-f10-untrusted-content"])
def test_untrusted_content_is_inert_text(delta_server, watched, thread_id):
    page = watched.page
    _login(page, delta_server)
    response = page.goto(delta_server.url(f"/threads/{thread_id}/"))
    assert response.status == 200
    _assert_csp(response)
    _wait_history(page)
    page.wait_for_timeout(500)  # give any injected handler a chance to fire

    assert page.locator("#messages li.message").count() == _sqlite(thread_id)["head"]["message_count"]
    assert page.locator("#messages script, #messages img, #messages iframe, #messages b").count() == 0
    assert page.evaluate("() => document.querySelectorAll('script:not([src])').length") == 0
    assert page.evaluate("() => [...document.scripts].every(s => new URL(s.src).pathname.startsWith('/static/'))")
    messages = page.locator("#messages")
    page.click("#messages-section button:text('Expand all')")  # messages are one collapsed line each
    for payload in ("<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                    "<iframe src=javascript:alert(1)></iframe>", "<script>alert('blocks')</script>",
                    "<b>markup</b>", "{{ 7*7 }}"):
        assert messages.get_by_text(payload, exact=False).first.is_visible(), payload

    assert watched.dialogs == []
    assert watched.probes() == {"xss": [], "csp": []}
    bad = [u for u in watched.requests if u.startswith("javascript:") or u.rstrip("/").endswith("/x")]
    assert bad == []
    assert not [e for e in watched.console_errors if "Content Security Policy" in e], watched.console_errors
    watched.shot(f"thread-{thread_id}")


def test_full_mode_server_answers_delta_thread_with_409(full_server, watched):
    page = watched.page
    _login(page, full_server)
    assert page.locator("header .process .badge").inner_text() == "full"
    response = page.goto(full_server.url("/threads/delta-f10-9t/"))
    assert response.status == 409
    _assert_csp(response)
    assert page.locator("#error-detail").inner_text() == (
        "Thread delta-f10-9t: Thread requires delta mode; materialize and convert its checkpoints "
        "before using full mode.")
    hint = page.locator(".error-card .hint").inner_text()
    assert hint.startswith("What to do:") and "delta" in hint
    assert page.locator("#messages").count() == 0
    watched.shot("full-server-delta-f10-9t-409")

    # The same full-mode server still serves a full thread.
    response = page.goto(full_server.url("/threads/full-tools-30t/"))
    assert response.status == 200
    count = _sqlite("full-tools-30t")["head"]["message_count"]
    assert page.locator("#messages-count").inner_text().startswith(f"{count} messages; showing 1–")
    watched.shot("full-server-full-tools-30t")
    assert watched.dialogs == [] and watched.probes() == {"xss": [], "csp": []}
