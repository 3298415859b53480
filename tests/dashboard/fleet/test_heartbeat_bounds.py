"""Heartbeat bounds: field sizes and ranges, and the body's size and depth, each a 400 with a code and a hint."""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard.fleet.forms import MAX_COUNT, MAX_PID, MAX_VERSIONS
from dashboard.fleet.models import ProcessRecord
from tests.dashboard.fleet.test_api import heartbeat_body, post_heartbeat, rt  # noqa: F401 - rt is a fixture

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("overrides", "field", "message"), [
    ({"versions": {f"pkg{n}": "1.0" for n in range(5_000)}}, "versions", "has 5,000 entries; send at most 64"),
    ({"versions": {"langgraph": "1" * 101}}, "versions", "at most 100 characters"),
    ({"versions": {"p" * 101: "1.0"}}, "versions", "at most 100 characters"),
    ({"pid": MAX_PID + 1}, "pid", "less than or equal to 4194304"),
    ({"snapshot_frequency": MAX_COUNT + 1}, "snapshot_frequency", "less than or equal to 1000000"),
    ({"max_supersteps": 10**18}, "max_supersteps", "less than or equal to 1000000"),
    ({"host": "h" * 256}, "host", "at most 255 characters"),
    ({"instance_id": "i" * 65}, "instance_id", "at most 64 characters"),
    ({"heartbeat_interval_s": 1e9}, "heartbeat_interval_s", "less than or equal to 3600"),
], ids=["versions-5k", "version-long", "package-long", "pid", "cadence", "supersteps", "host", "instance", "interval"])
def test_out_of_range_fields_are_refused(rt, api_token, overrides, field, message):  # noqa: F811
    response = post_heartbeat(Client(), heartbeat_body(**overrides), api_token)
    if response.status_code == 400 and response.json()["code"] == "body_too_large":
        pytest.fail("the bound under test must be hit before the body size")
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["code"] == "invalid_parameters" and body["hint"]
    assert field in body["detail"] and message in body["detail"], body["detail"]
    assert ProcessRecord.objects.filter(role="external").count() == 0


def test_the_bounds_themselves_are_accepted(rt, api_token):  # noqa: F811
    body = heartbeat_body(pid=MAX_PID, snapshot_frequency=MAX_COUNT,
                          versions={f"pkg{n}": "1" * 100 for n in range(MAX_VERSIONS)})
    assert post_heartbeat(Client(), body, api_token).status_code == 200


def test_a_huge_or_deep_heartbeat_body_is_refused(rt, api_token):  # noqa: F811
    # The 50,000-entry versions object is about 900 KB: refused by size before it is parsed.
    huge = post_heartbeat(Client(), heartbeat_body(versions={f"pkg{n}": "1.0" for n in range(50_000)}), api_token)
    assert huge.status_code == 400 and huge.json()["code"] == "body_too_large"
    deep = post_heartbeat(Client(), '{"versions": ' + "[" * 50 + "]" * 50 + "}", api_token)
    assert deep.status_code == 400 and deep.json()["code"] == "json_too_deep" and deep.json()["hint"]
