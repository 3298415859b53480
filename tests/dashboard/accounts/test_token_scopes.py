"""Permissions per write: token scopes (read / heartbeat / manage), expiry, last use; heartbeats need a permission.

Personas: ``viewer`` (staff, no permission), ``manager`` (jobs.manage_conversions),
a ``reporter`` (staff with fleet.report_heartbeat), each with bearer tokens.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from dashboard.accounts.models import ALL_SCOPES, ApiToken
from dashboard.fleet.models import ProcessRecord
from dashboard.jobs.models import ConversionJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(sqlite_fixture_db, runtime_for):
    return runtime_for(sqlite_fixture_db, "delta")


@pytest.fixture
def reporter(django_user_model):
    user = django_user_model.objects.create_user("reporter", password="reporter-pass", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="report_heartbeat"))
    return user


def _heartbeat(raw: str | None = None, client: Client | None = None):
    body = {"instance_id": uuid.uuid4().hex, "host": "gw", "pid": 7, "mode": "delta", "snapshot_frequency": 10}
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"} if raw else {}
    return (client or Client()).post("/api/processes/heartbeat", json.dumps(body), content_type="application/json",
                                     **headers)


def _job(raw: str):
    return Client().post("/api/jobs", json.dumps({"kind": "dry_run", "thread_ids": ["delta-f10-1t"]}),
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")


def test_a_viewer_cannot_add_fleet_members(served, viewer, viewer_client):
    _, raw = ApiToken.issue(viewer)
    for response in (_heartbeat(raw), _heartbeat(client=viewer_client)):
        assert response.status_code == 403
        body = response.json()
        assert body["code"] == "permission_denied" and "fleet.report_heartbeat" in body["hint"]
    assert ProcessRecord.objects.filter(role="external").count() == 0


def test_a_heartbeat_only_token_reports_but_cannot_read_or_launch(served, reporter, manager):
    reporter.user_permissions.add(Permission.objects.get(codename="manage_conversions"))
    _, raw = ApiToken.issue(reporter, scopes=["heartbeat"])
    assert _heartbeat(raw).status_code == 200
    read = Client().get("/api/threads", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert read.status_code == 403 and read.json()["code"] == "token_scope"
    assert "--scope read" in read.json()["hint"]
    launch = _job(raw)
    assert launch.status_code == 403 and launch.json()["code"] == "token_scope"
    assert ConversionJob.objects.count() == 0


def test_a_read_token_of_a_manager_cannot_launch(served, manager):
    _, raw = ApiToken.issue(manager, scopes=["read"])
    assert Client().get("/api/jobs", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    refused = _job(raw)
    assert refused.status_code == 403 and refused.json()["code"] == "token_scope"
    assert "'manage'" in refused.json()["detail"]
    _, full = ApiToken.issue(manager, scopes=["read", "manage"])
    assert _job(full).status_code == 201


def test_scopes_never_grant_a_permission(served, viewer):
    _, raw = ApiToken.issue(viewer, scopes=list(ALL_SCOPES))
    assert _job(raw).json()["code"] == "permission_denied"
    assert _heartbeat(raw).json()["code"] == "permission_denied"


def test_an_expired_token_is_401_and_last_use_is_recorded(served, staff_user):
    token, raw = ApiToken.issue(staff_user, expires_at=timezone.now() + dt.timedelta(hours=1))
    assert Client().get("/api/threads", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None and timezone.now() - token.last_used_at < dt.timedelta(minutes=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    expired = Client().get("/api/threads", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert expired.status_code == 401 and expired.json()["code"] == "invalid_token"


def test_the_command_issues_scoped_expiring_tokens(staff_user):
    out = io.StringIO()
    call_command("create_api_token", "staff", "--scope", "heartbeat", "--expires-days", "30", stdout=out)
    token = ApiToken.objects.get()
    assert token.scopes == ["heartbeat"]
    assert dt.timedelta(days=29) < token.expires_at - timezone.now() <= dt.timedelta(days=30)
    call_command("create_api_token", "staff", stdout=io.StringIO())
    assert ApiToken.objects.latest("pk").scopes == ["read", "heartbeat", "manage"]
    assert ApiToken.objects.latest("pk").expires_at is None
    with pytest.raises(CommandError, match="--expires-days 0: give a number of days from 1 to 3650"):
        call_command("create_api_token", "staff", "--expires-days", "0", stdout=io.StringIO())


def test_an_unknown_scope_is_refused(staff_user):
    with pytest.raises(ValueError, match="scopes must be some of read, heartbeat, manage"):
        ApiToken.issue(staff_user, scopes=["admin"])
    with pytest.raises(CommandError, match="invalid choice: 'admin'"):
        call_command("create_api_token", "staff", "--scope", "admin", stdout=io.StringIO())
