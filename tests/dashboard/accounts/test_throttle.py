"""Login throttling (django-axes): guessing is answered 429 with Retry-After within 10 attempts.

Per username (from any address), per address (any username), and for API
bearer tokens. A lockout is logged and listed for superusers in the admin.
Personas: ``staff`` (password ``staff-pass``), an attacker at 10.0.0.66.
"""

from __future__ import annotations

import logging

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client

from dashboard.accounts.throttle import LOCKED_OUT_HINT

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
LIMIT = settings.AXES_FAILURE_LIMIT


def _guess(username: str, password: str, ip: str = "10.0.0.66"):
    return Client(REMOTE_ADDR=ip).post(LOGIN, {"username": username, "password": password})


def _assert_locked(response) -> None:
    assert response.status_code == 429
    assert int(response["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds() == 900


def test_the_limit_is_a_few_attempts():
    assert 1 < LIMIT < 10


def test_it_locks_a_username_after_the_limit_even_for_the_right_password(staff_user, caplog):
    with caplog.at_level(logging.WARNING, logger="axes"):
        answers = [_guess("staff", f"wrong-{n}", ip=f"10.0.1.{n}").status_code for n in range(LIMIT)]
    assert answers == [200] * (LIMIT - 1) + [429]
    response = _guess("staff", "staff-pass", ip="10.0.2.1")  # another address, the right password
    _assert_locked(response)
    assert "_auth_user_id" not in response.wsgi_request.session
    html = response.content.decode()
    assert "Too many failed attempts" in html and "axes_reset" in html
    assert any("Locking out" in r.getMessage() and "staff" in r.getMessage()
               for r in caplog.records), "the lockout is logged"


def test_it_locks_an_address_that_tries_many_usernames(staff_user):
    answers = [_guess(f"user{n}", "guess").status_code for n in range(LIMIT)]
    assert answers[-1] == 429 and set(answers[:-1]) == {200}
    _assert_locked(_guess("staff", "staff-pass"))
    assert _guess("staff", "staff-pass", ip="10.0.3.3").status_code == 302  # the user may still log in elsewhere


def test_a_success_before_the_limit_resets_the_count(staff_user):
    for _ in range(LIMIT - 1):
        assert _guess("staff", "wrong").status_code == 200
    assert _guess("staff", "staff-pass").status_code == 302
    assert [_guess("staff", "wrong").status_code for _ in range(LIMIT - 1)] == [200] * (LIMIT - 1)


def test_bad_bearer_tokens_are_throttled_per_address(staff_user):
    client = Client(REMOTE_ADDR="10.0.0.77")
    answers = [client.get("/api/threads", HTTP_AUTHORIZATION=f"Bearer dfa_guess{n}") for n in range(LIMIT)]
    assert [a.status_code for a in answers] == [401] * (LIMIT - 1) + [429]
    locked = client.get("/api/threads", HTTP_AUTHORIZATION="Bearer dfa_guess-again")
    _assert_locked(locked)
    body = locked.json()
    assert body["code"] == "too_many_attempts" and body["hint"] == LOCKED_OUT_HINT
    attempt = AccessAttempt.objects.get(ip_address="10.0.0.77", username=None)
    assert attempt.failures_since_start >= LIMIT  # counted against the address, not a name every token user shares
    assert "dfa_guess" not in attempt.get_data + attempt.post_data  # tokens are masked in the record


def test_lockouts_are_listed_for_superusers_only(staff_user, django_user_model):
    for n in range(LIMIT):
        _guess("staff", f"wrong-{n}")
    admin = django_user_model.objects.create_superuser("root", password="root-pass")
    root = Client()
    root.force_login(admin)
    page = root.get("/admin/axes/accessattempt/")
    assert page.status_code == 200
    assert "10.0.0.66" in page.content.decode()
    staff = Client()
    staff.force_login(staff_user)
    assert staff.get("/admin/axes/accessattempt/").status_code in (302, 403)


def test_proxy_count_takes_the_address_the_proxy_saw(settings):
    from django.test import RequestFactory

    from dashboard.accounts.throttle import client_ip

    request = RequestFactory().get("/", REMOTE_ADDR="172.18.0.2", HTTP_X_FORWARDED_FOR="1.1.1.1, 203.0.113.9")
    assert client_ip(request) == "172.18.0.2"
    settings.DASHBOARD_PROXY_COUNT = 1
    assert client_ip(request) == "203.0.113.9"  # the forged left-most entry is ignored
    settings.DASHBOARD_PROXY_COUNT = 3
    assert client_ip(request) == "172.18.0.2"  # fewer hops than proxies: the direct peer
