"""HTTP conventions: HEAD as GET on every GET route, 415 for a JSON body sent as something else,
strict JSON types (a string is no number, a number no string, a list no string).

Personas: ``staff`` (a bearer token with every scope), ``manager`` (launches jobs).
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from dashboard.fleet.models import ProcessRecord
from dashboard.jobs.models import ConversionJob
from tests.dashboard.accounts.test_api_auth import ROUTES, bearer, issue, served  # noqa: F401 - fixture
from tests.dashboard.fleet.conftest import api_token  # noqa: F401 - fixture
from tests.dashboard.fleet.test_api import heartbeat_body

pytestmark = pytest.mark.django_db

#: Every route a GET reaches (not the admin), with the answer a GET gets.
GET_ROUTES = [(name, url) for name, url in ROUTES if name not in ("logout",)]


def test_head_on_healthz_answers_as_get_without_a_body(served):  # noqa: F811
    got, head = Client().get("/healthz"), Client().head("/healthz")
    assert got.status_code == head.status_code == 200
    assert head.content == b"" and head["Content-Type"] == got["Content-Type"]
    assert int(head["Content-Length"]) == len(got.content) > 0


@pytest.mark.parametrize(("name", "url"), GET_ROUTES)
def test_head_answers_every_route_as_get_does(served, staff_user, name, url):  # noqa: F811
    headers = bearer(issue()) if url.startswith("/api/") else {}
    client = Client()
    if not url.startswith("/api/"):
        client.force_login(staff_user)
    got = client.get(url, **headers)
    head = client.head(url, **headers)
    if got.status_code == 405:  # a POST-only route refuses HEAD as it refuses GET
        assert head.status_code == 405
        return
    assert head.status_code == got.status_code, (url, got.status_code, head.status_code)
    assert head.content == b""


def test_a_post_only_route_still_refuses_head(served, staff_user):  # noqa: F811
    client = Client()
    client.force_login(staff_user)
    assert client.head("/jobs/launch").status_code == 405


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_a_job_body_not_sent_as_json_is_415(delta_rt_like, manager, content_type):
    from dashboard.accounts.models import ApiToken

    raw = ApiToken.issue(manager)[1]
    response = Client().post("/api/jobs", json.dumps({"kind": "dry_run", "thread_ids": ["delta-f10-1t"]}),
                             content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 415, response.content[:300]
    body = response.json()
    assert body["code"] == "unsupported_media_type" and "application/json" in body["hint"]
    assert ConversionJob.objects.count() == 0


def test_a_heartbeat_sent_as_text_is_415(served, api_token):  # noqa: F811
    response = Client().post("/api/processes/heartbeat", json.dumps(heartbeat_body()), content_type="text/plain",
                             HTTP_AUTHORIZATION=f"Bearer {api_token}")
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"
    assert not ProcessRecord.objects.filter(role="external").exists()


@pytest.fixture
def delta_rt_like(served):  # noqa: F811
    return served


@pytest.mark.parametrize(("change", "field"), [
    ({"throttle_delay_s": "5"}, "throttle_delay_s"), ({"max_in_flight": "2"}, "max_in_flight"),
    ({"thread_ids": None, "filter": {"q": 10}}, "filter.q"), ({"estimate_job": 1.0}, "estimate_job"),
])
def test_job_fields_are_strictly_typed(delta_rt_like, manager, change, field):
    from dashboard.accounts.models import ApiToken

    body = {k: v for k, v in {"kind": "dry_run", "thread_ids": ["delta-f10-1t"], **change}.items() if v is not None}
    response = Client().post("/api/jobs", json.dumps(body), content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(manager)[1]}")
    assert response.status_code == 400 and field in response.json()["detail"], response.content[:300]
    assert ConversionJob.objects.count() == 0


def test_a_heartbeat_host_given_as_a_list_is_refused_not_stored_as_its_repr(served, api_token):  # noqa: F811
    response = Client().post("/api/processes/heartbeat", json.dumps(heartbeat_body(host=["a"])),
                             content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}")
    assert response.status_code == 400 and "host" in response.json()["detail"]
    assert not ProcessRecord.objects.filter(host="['a']").exists()
