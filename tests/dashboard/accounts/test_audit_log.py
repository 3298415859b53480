"""The audit log of writes: who, what, when, from where; browsable by superusers only (Django's admin).

Personas: ``manager`` (session and token), ``viewer`` (refused writes are recorded too),
a superuser ``root``, anonymous.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from dashboard.accounts.models import ApiToken, AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(sqlite_fixture_db, runtime_for):
    return runtime_for(sqlite_fixture_db, "delta")


def test_a_token_write_is_recorded_with_who_what_when_where(served, manager):
    token, raw = ApiToken.issue(manager)
    response = Client(REMOTE_ADDR="192.0.2.10").post(
        "/api/jobs", json.dumps({"kind": "dry_run", "thread_ids": ["delta-f10-1t"]}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 201
    entry = AuditEntry.objects.get()
    assert (entry.user, entry.username, entry.via, entry.token_prefix) == (manager, "manager", "token", token.prefix)
    assert (entry.method, entry.path, entry.action, entry.status) == ("POST", "/api/jobs", "jobs_api:jobs", 201)
    assert entry.remote_addr == "192.0.2.10" and entry.at is not None


def test_session_writes_and_refusals_are_recorded_reads_are_not(served, manager_client, viewer_client):
    manager_client.get("/jobs/")
    manager_client.post("/jobs/launch", {"thread_id": ["delta-f10-1t"]})
    viewer_client.post("/jobs/launch", {"thread_id": ["delta-f10-1t"]})
    rows = list(AuditEntry.objects.order_by("id").values_list("username", "via", "method", "action", "status"))
    assert rows[0][:4] == ("manager", "session", "POST", "jobs:launch") and rows[0][4] in (200, 302)
    assert rows[1] == ("viewer", "session", "POST", "jobs:launch", 403)
    assert len(rows) == 2


def test_anonymous_requests_and_heartbeats_are_not_recorded(served, staff_user):
    from django.contrib.auth.models import Permission

    Client().post("/api/jobs", "{}", content_type="application/json")
    staff_user.user_permissions.add(Permission.objects.get(codename="report_heartbeat"))
    _, raw = ApiToken.issue(staff_user)
    beat = Client().post("/api/processes/heartbeat", json.dumps(
        {"instance_id": "a" * 32, "host": "gw", "pid": 1, "mode": "delta", "snapshot_frequency": 10}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert beat.status_code == 200
    assert AuditEntry.objects.count() == 0


def test_superusers_browse_the_log_staff_do_not(served, manager_client, staff_user, django_user_model):
    manager_client.post("/jobs/launch", {"thread_id": ["delta-f10-1t"]})
    root = Client()
    root.force_login(django_user_model.objects.create_superuser("root", password="root-pass"))
    page = root.get("/admin/accounts/auditentry/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/jobs/launch" in html and "manager" in html
    assert root.get("/admin/accounts/auditentry/add/").status_code == 403  # read-only
    staff = Client()
    staff.force_login(staff_user)
    assert staff.get("/admin/accounts/auditentry/").status_code in (302, 403)
