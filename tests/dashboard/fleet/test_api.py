"""GET /api/audit and POST /api/processes/heartbeat (dashboard.fleet.api)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from dashboard.fleet.control import recent_live_check
from dashboard.fleet.models import ProcessRecord
from tests.dashboard.fleet.conftest import sha

pytestmark = pytest.mark.django_db

AUDIT_KEYS = {"generated_at", "processes", "live", "findings", "census", "cadences", "writers", "readiness",
              "orphans", "history_cache"}


@pytest.fixture
def rt(runtime_for, sqlite_fixture_db):
    return runtime_for(sqlite_fixture_db, "delta", 10)


def bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def heartbeat_body(**overrides) -> dict:
    body = {"instance_id": uuid.uuid4().hex, "host": "gateway-host", "pid": 4242, "mode": "delta",
            "snapshot_frequency": 10, "config_path": "/srv/deer-flow/config.yaml",
            "config_sha256": sha("gateway"), "versions": {"langgraph": "1.2.9"}}
    body.update(overrides)
    return body


def post_heartbeat(client: Client, body, token: str | None = None, **extra):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    headers = bearer(token) if token else {}
    return client.post("/api/processes/heartbeat", data=data, content_type="application/json", **headers, **extra)


# -- GET /api/audit -----------------------------------------------------------------------------

def test_audit_requires_staff_or_token(rt, outsider_user):
    anonymous = Client().get("/api/audit")
    assert anonymous.status_code == 401
    assert anonymous.json()["code"] == "authentication_required" and set(anonymous.json()) == {"detail", "hint", "code"}
    outsider = Client()
    outsider.force_login(outsider_user)
    assert outsider.get("/api/audit").status_code == 403
    assert Client().get("/api/audit", **bearer("dfa_not-a-token")).status_code == 401


def test_audit_shape_for_staff_session_and_token(rt, staff_client, api_token, process_row):
    process_row("web")
    recent_live_check(10, background=False)  # the API serves the newest check; here, one made now
    for response in (staff_client.get("/api/audit"), Client().get("/api/audit", **bearer(api_token))):
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        body = response.json()
        assert set(body) == AUDIT_KEYS
        assert body["census"] == {"full": 8, "delta": 17, "delta_counters_only": 0, "migrated": 1,
                                  "inconsistent": 1}
        assert [p["role"] for p in body["processes"]] == ["web"]
        assert set(body["readiness"]) == {"to_full", "to_delta"}
        # The embedded filesystem broker broadcasts; no worker runs on this test's private one.
        assert body["live"] == {"supported": True, "error": None, "answered": [], "unregistered": []}
        assert all(set(f) == {"severity", "code", "message", "evidence", "hint", "threads"} for f in body["findings"])
        assert body["cadences"] == {"fleet": 10, "threads_with_several": 0, "threads_differing_from_fleet": 2}


def test_audit_threads_only_when_asked(rt, staff_client):
    assert "threads" not in staff_client.get("/api/audit").json()
    threads = staff_client.get("/api/audit?threads=1").json()["threads"]
    assert len(threads) == 27
    by_id = {t["thread_id"]: t for t in threads}
    assert by_id["markerless-delta-f10-13t"] == {"thread_id": "markerless-delta-f10-13t", "class": "inconsistent",
                                                 "inferred_snapshot_frequency": 10, "inferred_exact": True,
                                                 "cadences": {"exact": [10], "lower_bound": None},
                                                 "multiple_cadences": False}
    assert by_id["delta-f10-1t"]["inferred_exact"] is False
    by_thread = staff_client.get("/api/audit?threads=1").json()["cadences"]["by_thread"]
    assert by_thread["delta-f100-150t"] == {"exact": [100], "lower_bound": None}


def test_audit_is_get_only(rt, staff_client):
    assert staff_client.post("/api/audit").status_code == 405


# -- POST /api/processes/heartbeat --------------------------------------------------------------

def test_heartbeat_with_token_registers_an_outside_process(rt, api_token, process_row):
    web = process_row("web", snapshot_frequency=10)
    body = heartbeat_body(snapshot_frequency=25, name="gateway-1")
    client = Client(enforce_csrf_checks=True)  # a token needs no CSRF token
    response = post_heartbeat(client, body, api_token)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["name"] == "gateway-1" and answer["instance_id"] == body["instance_id"]
    row = ProcessRecord.objects.get(instance_id=body["instance_id"])
    assert (row.role, row.host, row.pid, row.mode, row.snapshot_frequency) == ("external", "gateway-host", 4242,
                                                                               "delta", 25)
    assert row.versions == {"langgraph": "1.2.9"} and row.config_sha256 == sha("gateway")

    audit = client.get("/api/audit", **bearer(api_token)).json()
    listed = {p["name"]: p for p in audit["processes"]}
    assert listed["gateway-1"]["role"] == "external" and listed["gateway-1"]["state"] == "live"
    mismatch = [f for f in audit["findings"] if f["code"] == "cadence_mismatch"]
    assert [f["message"] for f in mismatch] == [f"gateway-1 differs from {web.name} in: snapshot_frequency 25 ≠ 10"]


def test_heartbeat_again_refreshes_the_same_row(rt, api_token):
    body = heartbeat_body()
    first = post_heartbeat(Client(), body, api_token).json()
    second = post_heartbeat(Client(), {**body, "snapshot_frequency": 10}, api_token).json()
    assert ProcessRecord.objects.filter(instance_id=body["instance_id"]).count() == 1
    assert second["last_heartbeat"] >= first["last_heartbeat"]
    assert second["name"] == "external@gateway-host:4242"


def _without(key: str) -> dict:
    body = heartbeat_body()
    del body[key]
    return body


@pytest.mark.parametrize(("payload", "in_detail", "code"), [
    (b"{not json", "Body is not JSON", "invalid_json"),
    (b"\xff\xfe", "Body is not JSON", "invalid_json"),
    ("[1, 2]", "Body must be a JSON object", "invalid_json"),
    ({"host": "h"}, "instance_id", "invalid_parameters"),
    (_without("mode"), "mode", "invalid_parameters"),
    (_without("snapshot_frequency"), "snapshot_frequency", "invalid_parameters"),
    (heartbeat_body(mode="turbo"), "mode", "invalid_parameters"),
    (heartbeat_body(snapshot_frequency=0), "snapshot_frequency", "invalid_parameters"),
    (heartbeat_body(config_sha256="not-a-sha"), "config_sha256", "invalid_parameters"),
    (heartbeat_body(versions=["langgraph"]), "versions", "invalid_parameters"),
    (heartbeat_body(pid="twelve"), "pid", "invalid_parameters"),
], ids=["not-json", "not-utf8", "array", "nearly-empty", "no-mode", "no-cadence", "bad-mode", "cadence-0",
        "bad-sha", "versions-list", "pid-text"])
def test_bad_heartbeats_are_400_with_detail_and_hint(rt, api_token, payload, in_detail, code):
    response = post_heartbeat(Client(), payload, api_token)
    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"detail", "hint", "code"} and body["code"] == code
    assert in_detail in body["detail"]
    assert body["hint"]
    assert ProcessRecord.objects.count() == 0


def test_heartbeat_authentication(rt, staff_client, outsider_user):
    assert post_heartbeat(Client(), heartbeat_body()).status_code == 401
    assert post_heartbeat(Client(), heartbeat_body(), "dfa_revoked").status_code == 401
    outsider = Client()
    outsider.force_login(outsider_user)
    assert post_heartbeat(outsider, heartbeat_body()).status_code == 403
    # Anonymous: 401 before the method check (and before CSRF); with a credential the wrong method is a 405.
    assert Client().get("/api/processes/heartbeat").status_code == 401
    assert staff_client.get("/api/processes/heartbeat").status_code == 405
    assert ProcessRecord.objects.count() == 0


def test_session_heartbeat_needs_the_csrf_token(rt, staff_user):
    from django.contrib.auth.models import Permission

    staff_user.user_permissions.add(Permission.objects.get(codename="report_heartbeat"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    refused = post_heartbeat(client, heartbeat_body())
    assert refused.status_code == 403
    assert {"detail", "hint"} <= set(refused.json())
    assert ProcessRecord.objects.count() == 0
    client.get("/audit/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    accepted = post_heartbeat(client, heartbeat_body(), HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 200, accepted.content
    assert ProcessRecord.objects.get().role == "external"


def test_heartbeat_cannot_take_over_a_dashboard_process(rt, api_token, process_row):
    worker = process_row("worker")
    response = post_heartbeat(Client(), heartbeat_body(instance_id=worker.instance_id), api_token)
    assert response.status_code == 409
    assert {"detail", "hint"} <= set(response.json())
    worker.refresh_from_db()
    assert worker.role == "worker" and worker.host == "host-1"
