"""Token throttling (django-axes through its extension points, dashboard.accounts.throttle).

Bad bearer tokens count against their address and their token prefix, never against a name every
token user shares; a valid token is never refused because of anyone's failures, nor counted; an
outside process's heartbeats with a valid token always land; ``/metrics`` guesses are throttled the
same way and its answer is never cached. Personas: ``staff`` (a token user), an attacker at 10.0.0.66,
an operator at 10.0.9.9, a heartbeat sender at 10.0.8.8.
"""

from __future__ import annotations

import json

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client

from dashboard.accounts.models import ApiToken
from dashboard.accounts.throttle import token_credential
from dashboard.fleet.models import ProcessRecord
from tests.dashboard.fleet.conftest import api_token  # noqa: F401 - fixture
from tests.dashboard.fleet.test_api import heartbeat_body, rt  # noqa: F401 - rt is a fixture

pytestmark = pytest.mark.django_db

LIMIT = settings.AXES_FAILURE_LIMIT
ATTACKER, OPERATOR = "10.0.0.66", "10.0.9.9"


def _get(raw: str, ip: str):
    return Client(REMOTE_ADDR=ip).get("/api/threads", HTTP_AUTHORIZATION=f"Bearer {raw}")


def test_five_bad_tokens_lock_the_guessing_address_only(rt, staff_user):  # noqa: F811
    _, raw = ApiToken.issue(staff_user)
    assert [_get(f"guess-{n}", ATTACKER).status_code for n in range(LIMIT)] == [401] * (LIMIT - 1) + [429]
    assert _get("guess-more", ATTACKER).status_code == 429
    # Another address with a valid token, and with a bad one: neither is locked by the attacker's failures.
    assert _get(raw, OPERATOR).status_code == 200
    assert _get("typo", OPERATOR).status_code == 401
    assert AccessAttempt.objects.filter(username__isnull=False).count() == 0


def test_a_valid_token_is_never_refused_nor_counted(rt, staff_user):  # noqa: F811
    _, raw = ApiToken.issue(staff_user)
    for n in range(LIMIT + 2):
        _get(f"guess-{n}", ATTACKER)
    # Even from the locked address (a NAT shared with the attacker): the valid token is served, not counted.
    assert _get(raw, ATTACKER).status_code == 200
    before = AccessAttempt.objects.get(ip_address=ATTACKER).failures_since_start
    assert [_get(raw, ATTACKER).status_code for _ in range(3)] == [200] * 3
    assert AccessAttempt.objects.get(ip_address=ATTACKER).failures_since_start == before


def test_guesses_at_one_token_prefix_are_counted_against_that_prefix_from_every_address(rt, staff_user):  # noqa: F811
    _, raw = ApiToken.issue(staff_user)
    prefix = raw[:12]
    assert token_credential(raw) == f"api-token:{prefix}" and token_credential("guess") == ""
    answers = [_get(f"{prefix}wrong{n}", f"10.0.5.{n}").status_code for n in range(LIMIT)]
    assert answers == [401] * (LIMIT - 1) + [429]  # spread over addresses, caught by the prefix
    assert _get(f"{prefix}wrong-again", "10.0.6.1").status_code == 429
    assert _get(raw, "10.0.6.1").status_code == 200  # the token itself still works
    other = ApiToken.issue(staff_user)[1]
    assert _get(other, "10.0.6.1").status_code == 200
    assert set(AccessAttempt.objects.values_list("username", flat=True)) == {f"api-token:{prefix}"}


def test_heartbeats_with_a_valid_token_land_while_the_address_is_locked(rt, api_token):  # noqa: F811
    for n in range(LIMIT + 1):
        _get(f"guess-{n}", "10.0.8.8")
    body = heartbeat_body()
    response = Client(REMOTE_ADDR="10.0.8.8").post("/api/processes/heartbeat", json.dumps(body),
                                                   content_type="application/json",
                                                   HTTP_AUTHORIZATION=f"Bearer {api_token}")
    assert response.status_code == 200, response.content
    assert ProcessRecord.objects.filter(instance_id=body["instance_id"]).exists()


@pytest.fixture
def metrics_token(settings) -> str:
    settings.DASHBOARD_METRICS_TOKEN = "metrics-secret-0123456789"
    return settings.DASHBOARD_METRICS_TOKEN


def _scrape(raw: str | None, ip: str):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"} if raw is not None else {}
    return Client(REMOTE_ADDR=ip).get("/metrics", **headers)


def test_metrics_token_guesses_are_throttled_and_the_right_token_still_scrapes(rt, metrics_token):  # noqa: F811
    answers = [_scrape(f"guess-{n}", ATTACKER) for n in range(LIMIT)]
    assert [a.status_code for a in answers] == [401] * (LIMIT - 1) + [429]
    assert answers[-1]["Retry-After"] == "900" and answers[-1].json()["code"] == "too_many_attempts"
    assert _scrape("guess-again", "10.0.7.7").status_code == 429  # the metrics token is one name for everyone
    ok = _scrape(metrics_token, ATTACKER)
    assert ok.status_code == 200 and ok["Cache-Control"] == "no-store"
    assert _scrape(None, "10.0.7.8").status_code == 401  # no token at all: refused, not counted
    assert not AccessAttempt.objects.filter(ip_address="10.0.7.8").exists()
