"""Pages read the newest live check (the audit page, ``GET /api/audit``, ``/metrics``): the Celery broadcast
waits its whole 1 s timeout, so a page never waits for it: it shows the newest check with its age, an older one
than ``DASHBOARD_LIVE_CHECK_MAX_AGE_S`` is refreshed in the background, and before the first one answers the
page says so and shows the heartbeats."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache

from dashboard.fleet.control import LIVE_CHECK_KEY, PENDING, LiveCheck, recent_live_check

pytestmark = pytest.mark.django_db


class Broadcasts:
    """A stand-in for the broadcast that counts its calls and names each answer after its number."""

    def __init__(self):
        self.calls = 0

    def __call__(self) -> LiveCheck:
        self.calls += 1
        return LiveCheck(True, {f"worker{self.calls}@h1": {"mode": "delta"}}, checked_at=time.time())


def _landed(check: Broadcasts, calls: int) -> None:
    deadline = time.monotonic() + 5
    while check.calls < calls or cache.get(LIVE_CHECK_KEY) is None or cache.get(f"{LIVE_CHECK_KEY}:refreshing"):
        assert time.monotonic() < deadline, "the background refresh never ran"
        time.sleep(0.02)


def test_before_any_check_the_page_gets_the_pending_answer_at_once():
    check = Broadcasts()
    started = time.monotonic()
    first = recent_live_check(10, lambda: time.sleep(0.5) or check())
    assert time.monotonic() - started < 0.4
    assert not first.supported and first.error == PENDING and first.checked_at == 0
    _landed(check, 1)
    assert list(recent_live_check(10, check).replies) == ["worker1@h1"] and check.calls == 1


def test_a_fresh_check_is_reused_and_a_stale_one_refreshed():
    check = Broadcasts()
    first = recent_live_check(10, check, background=False)  # nothing cached: made in this call
    assert check.calls == 1 and list(first.replies) == ["worker1@h1"]
    again = recent_live_check(10, check)
    assert check.calls == 1 and again.replies == first.replies and again.checked_at == first.checked_at
    # Older than the maximum age: the page still gets the old one at once, the refresh makes the next one.
    cache.set(LIVE_CHECK_KEY, LiveCheck(True, first.replies, checked_at=time.time() - 11))
    stale = recent_live_check(10, check, background=False)
    assert list(stale.replies) == ["worker1@h1"] and check.calls == 2
    assert list(recent_live_check(10, check).replies) == ["worker2@h1"] and check.calls == 2


def test_the_background_refresh_lands_in_the_cache():
    check = Broadcasts()
    cache.set(LIVE_CHECK_KEY, LiveCheck(True, {"old@h1": {}}, checked_at=time.time() - 60))
    assert list(recent_live_check(10, check).replies) == ["old@h1"]
    deadline = time.monotonic() + 5
    while check.calls == 0 or cache.get(LIVE_CHECK_KEY).replies == {"old@h1": {}}:
        assert time.monotonic() < deadline, "the background refresh never ran"
        time.sleep(0.02)
    assert list(recent_live_check(10, check).replies) == ["worker1@h1"] and check.calls == 1


def test_max_age_zero_checks_every_time():
    check = Broadcasts()
    recent_live_check(0, check)
    recent_live_check(0, check)
    assert check.calls == 2


def test_the_audit_page_shows_the_cached_check_and_when(runtime_for, sqlite_fixture_db, staff_client, settings):
    runtime_for(sqlite_fixture_db, "delta")
    settings.DASHBOARD_LIVE_CHECK_MAX_AGE_S = 10
    made = time.time()
    cache.set(LIVE_CHECK_KEY, LiveCheck(True, {"w1@h1": {}, "w2@h1": {}}, checked_at=made))
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = staff_client.get("/audit/", **headers).content.decode()
        assert "Live check: 2 workers answered" in html
        assert time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(made)) in html.split('id="live-checked-at"')[1][:200]
    # The API serves the same newest check (it never waits for a broadcast either).
    assert sorted(staff_client.get("/api/audit").json()["live"]["answered"]) == ["w1@h1", "w2@h1"]
