"""Hostile JSON bodies: every field of every body, any JSON value, never a 500; a refusal names the field.

The bodies are ``POST /api/jobs`` (:class:`dashboard.jobs.schemas.JobBody`, its ``filter``
:class:`~dashboard.jobs.schemas.JobFilter`) and ``POST /api/processes/heartbeat``
(:class:`dashboard.fleet.schemas.HeartbeatBody`). Hypothesis puts hostile values (any JSON type, integers
past 64 bits and 400 digits long, NUL bytes, lone surrogates, control characters, nested lists and objects)
into one field of an otherwise valid body at a time. The answer is never 500; a value the schema refuses is
a 400 in the ``{"detail", "hint", "code"}`` shape whose detail names the field's path, and creates nothing.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.accounts.models import ApiToken
from dashboard.fleet.models import ProcessRecord
from dashboard.fleet.schemas import HeartbeatBody
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.schemas import JobBody, JobFilter
from tests.dashboard.fleet.conftest import api_token  # noqa: F401 - fixtures
from tests.dashboard.fleet.test_api import heartbeat_body, rt  # noqa: F401 - rt is a fixture
from tests.dashboard.jobs.conftest import delta_rt, small_db  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

_SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63, -(2**63) - 1, 10**399, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfffy", "\x1b[31m", "5", "true", "", " " * 3]),
)
#: Any JSON value, nested at most twice (the body's depth bound is tested elsewhere).
HOSTILE = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(
        ["\x00", "\ud800", "k\x07"])), inner, max_size=3)), max_leaves=6)

_EXAMPLES = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                            HealthCheck.too_slow])


def _bearer(user) -> dict:
    return {"Authorization": f"Bearer {ApiToken.issue(user)[1]}"}


def _refused_or_taken(response, schema, body: dict, path: str) -> None:
    """No 500; a body the schema refuses is a 400 naming ``path``."""
    assert response.status_code != 500, (body, response.content[:300])
    try:
        schema.model_validate(body)
    except ValueError:
        assert response.status_code == 400, (body, response.content[:300])
        answer = response.json()
        assert set(answer) == {"detail", "hint", "code"} and answer["hint"], answer
        assert path in answer["detail"], (path, answer["detail"])


@pytest.fixture
def job_poster(delta_rt, manager):  # noqa: F811
    manager.user_permissions.add(Permission.objects.get(codename="manage_retention"))
    headers = _bearer(manager)

    def post(body: dict):
        return Client().post("/api/jobs", json.dumps(body), content_type="application/json", headers=headers)

    return post


@pytest.mark.parametrize("field", sorted(set(JobBody.model_fields) - {"filter"}))
def test_every_job_field_refuses_hostile_values_with_a_400_naming_it(job_poster, field):
    @_EXAMPLES
    @given(value=HOSTILE)
    def check(value):
        kind = "prune_dry_run" if field in ("rule", "keep_last", "protect", "backup", "dry_run") else "dry_run"
        body = {"kind": kind, "thread_ids": ["delta-f10-1t"], field: value}
        jobs = ConversionJob.objects.count()
        response = job_poster(body)
        _refused_or_taken(response, JobBody, body, field)
        if response.status_code >= 400:
            assert ConversionJob.objects.count() == jobs

    check()


@pytest.mark.parametrize("key", sorted(JobFilter.model_fields))
def test_every_filter_field_refuses_hostile_values_with_a_400_naming_it(job_poster, key):
    @_EXAMPLES
    @given(value=HOSTILE)
    def check(value):
        body = {"kind": "prune_dry_run", "filter": {key: value}, "rule": "safe_only"}
        _refused_or_taken(job_poster(body), JobBody, body, f"filter.{key}")

    check()


@pytest.mark.parametrize("field", sorted(HeartbeatBody.model_fields))
def test_every_heartbeat_field_refuses_hostile_values_with_a_400_naming_it(rt, api_token, field):  # noqa: F811
    @_EXAMPLES
    @given(value=HOSTILE)
    def check(value):
        body = heartbeat_body(**{field: value})
        response = Client().post("/api/processes/heartbeat", json.dumps(body), content_type="application/json",
                                 HTTP_AUTHORIZATION=f"Bearer {api_token}")
        _refused_or_taken(response, HeartbeatBody, body, field)
        if response.status_code == 400:
            assert not ProcessRecord.objects.filter(instance_id=str(body["instance_id"])[:64]).exists()

    check()


#: The bodies that answered 500 before the schemas (each names the field its 400 must name).
JOB_BODIES_THAT_WERE_500 = [
    ({"size_limit_bytes": 2**63}, "size_limit_bytes"),
    ({"thread_ids": [["delta-f10-1t"]]}, "thread_ids.0"),
    ({"thread_ids": [7]}, "thread_ids.0"),
    ({"thread_ids": [{"id": "delta-f10-1t"}]}, "thread_ids.0"),
    ({"thread_ids": None, "filter": {"q": {"$ne": ""}}}, "filter.q"),
    ({"thread_ids": None, "filter": {"q": ["a"]}}, "filter.q"),
    ({"kind": "prune_dry_run", "rule": "safe_only", "thread_ids": None,
      "filter": {"idle_days": int("9" * 400)}}, "filter.idle_days"),
    ({"thread_ids": ["delta\x00f10"]}, "thread_ids.0"),
    ({"thread_ids": ["\ud800"]}, "thread_ids.0"),
    ({"thread_ids": None, "filter": {"q": "f10\x00"}}, "filter.q"),
    ({"thread_ids": None, "filter": {"q": "\ud800"}}, "filter.q"),
    ({"kind": "prune_dry_run", "rule": "safe_only", "protect": ["\ud800"]}, "protect.0"),
    ({"kind": "prune_dry_run", "rule": "safe_only", "protect": ["ab\x00"]}, "protect.0"),
    ({"throttle_delay_s": "5"}, "throttle_delay_s"),
    ({"thread_ids": None, "filter": {"q": 10}}, "filter.q"),
]


@pytest.mark.parametrize(("change", "path"), JOB_BODIES_THAT_WERE_500, ids=[p for _, p in JOB_BODIES_THAT_WERE_500])
def test_the_job_bodies_that_answered_500_are_400s_naming_the_field(job_poster, change, path):
    body = {"kind": "dry_run", "thread_ids": ["delta-f10-1t"], **change}
    response = job_poster({k: v for k, v in body.items() if v is not None})
    assert response.status_code == 400, response.content[:300]
    assert path in response.json()["detail"], response.json()
    assert ConversionJob.objects.count() == 0


@pytest.mark.parametrize(("change", "path"), [
    ({"versions": {"lang\x00graph": "1.2"}}, "versions"), ({"versions": {"\ud800": "1.2"}}, "versions"),
    ({"host": "gate\x00way"}, "host"), ({"host": "\udfff"}, "host"), ({"host": ["a"]}, "host"),
    ({"pid": "4242"}, "pid"),
], ids=["version-key-nul", "version-key-surrogate", "host-nul", "host-surrogate", "host-list", "pid-text"])
def test_the_heartbeats_that_answered_500_or_were_coerced_are_400s(rt, api_token, change, path):  # noqa: F811
    response = Client().post("/api/processes/heartbeat", json.dumps(heartbeat_body(**change)),
                             content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["code"] == "invalid_parameters" and path in response.json()["detail"]
    assert ProcessRecord.objects.filter(role="external").count() == 0
