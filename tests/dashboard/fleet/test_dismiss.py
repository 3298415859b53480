"""Stale processes from a restart (issue 14, item 5): the old row of a process restarted with the same host,
role and config is recognised (``superseded``, an info finding instead of a warning), and any stale,
restarted or gone process can be dismissed on the audit page (``fleet.dismiss_process``, audited)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from dashboard.accounts.models import AuditEntry
from dashboard.fleet.models import ProcessRecord
from dashboard.fleet.processes import process_rows
from dashboard.fleet.registry import save_facts
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

HOUR = dt.timedelta(hours=1)


def _process(instance_id: str, *, started_ago: dt.timedelta, silent_for: dt.timedelta = dt.timedelta(0),
             **extra) -> ProcessRecord:
    now = timezone.now()
    values = {"instance_id": instance_id, "role": "web", "name": f"web@h1:{instance_id}", "host": "h1", "pid": 1,
              "started_at": now - started_ago, "last_heartbeat": now - silent_for, "mode": "delta",
              "snapshot_frequency": 10, "config_path": "/etc/c.yaml", "config_sha256": "a" * 64, **extra}
    return ProcessRecord.objects.create(**values)


@pytest.fixture
def dismisser(django_user_model):
    user = django_user_model.objects.create_user("dismisser", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="dismiss_process"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def restart(runtime_for, sqlite_fixture_db):
    runtime_for(sqlite_fixture_db, "delta")
    old = _process("old", started_ago=3 * HOUR, silent_for=HOUR)
    new = _process("new", started_ago=HOUR)
    return old, new


def _findings(client) -> dict[str, dict]:
    return {f["code"]: f for f in client.get("/api/audit").json()["findings"]}


def test_the_old_process_of_a_restart_is_recognised(restart, staff_client):
    rows = {r["instance_id"]: r for r in process_rows()}
    assert (rows["old"]["state"], rows["old"]["superseded_by"]) == ("superseded", "web@h1:new")
    assert rows["new"]["state"] == "live"
    findings = _findings(staff_client)
    assert "process_gone" not in findings
    assert findings["restarted_process"]["severity"] == "info"
    assert findings["restarted_process"]["message"] == "web@h1:old was restarted: web@h1:new replaced it"


@pytest.mark.parametrize("differs", [{"host": "h2"}, {"role": "worker"}, {"config_sha256": "b" * 64},
                                     {"config_path": "/other.yaml"}])
def test_another_host_role_or_config_is_not_a_restart(runtime_for, sqlite_fixture_db, staff_client, differs):
    runtime_for(sqlite_fixture_db, "delta")
    _process("old", started_ago=3 * HOUR, silent_for=HOUR)
    _process("new", started_ago=HOUR, **differs)
    assert {r["instance_id"]: r["state"] for r in process_rows()}["old"] == "gone"
    assert _findings(staff_client)["process_gone"]["severity"] == "info"


def test_an_older_start_does_not_supersede(runtime_for, sqlite_fixture_db):
    runtime_for(sqlite_fixture_db, "delta")
    _process("stale", started_ago=HOUR, silent_for=HOUR / 2)
    _process("older", started_ago=5 * HOUR)
    assert {r["instance_id"]: r["state"] for r in process_rows()}["stale"] == "gone"


def test_dismiss_then_gone_from_the_findings_and_audited(restart, dismisser):
    page = dismisser.get("/audit/").content
    (row,) = parse(page).find_all("tr", data_instance_id="old")
    assert row.find("form", cls="dismiss").attrs["action"] == "/audit/dismiss"
    assert not parse(page).find_all("tr", data_instance_id="new")[0].find_all("form")  # live: nothing to dismiss
    response = dismisser.post("/audit/dismiss", {"instance_id": "old"})
    assert response.status_code == 302 and response["Location"] == "/audit/"
    old = ProcessRecord.objects.get(instance_id="old")
    assert old.dismissed_by == "dismisser" and old.dismissed_at is not None
    assert {r["instance_id"]: r["state"] for r in process_rows()}["old"] == "dismissed"
    assert "restarted_process" not in _findings(dismisser)
    assert "dismissed by dismisser" in parse(dismisser.get("/audit/").content).find(
        "tr", data_instance_id="old").text
    (entry,) = AuditEntry.objects.filter(action="audit-dismiss")
    assert (entry.username, entry.method, entry.status) == ("dismisser", "POST", 302)


def test_a_plain_gone_process_can_be_dismissed_too(runtime_for, sqlite_fixture_db, dismisser):
    runtime_for(sqlite_fixture_db, "delta")
    _process("lone", started_ago=3 * HOUR, silent_for=HOUR)
    assert "process_gone" in _findings(dismisser)
    assert dismisser.post("/audit/dismiss", {"instance_id": "lone"}).status_code == 302
    assert "process_gone" not in _findings(dismisser)


def test_a_heartbeat_brings_a_dismissed_process_back(restart, dismisser):
    dismisser.post("/audit/dismiss", {"instance_id": "old"})
    save_facts("old", {"role": "web", "host": "h1", "pid": 1, "mode": "delta", "snapshot_frequency": 10})
    old = ProcessRecord.objects.get(instance_id="old")
    assert old.dismissed_at is None and old.dismissed_by == ""
    assert {r["instance_id"]: r["state"] for r in process_rows()}["old"] == "live"


@pytest.mark.parametrize("data, status, code", [({"instance_id": "new"}, 409, b"process_not_dismissible"),
                                                ({"instance_id": "nope"}, 404, b"process_not_found"),
                                                ({}, 400, b"invalid_parameters")])
def test_what_cannot_be_dismissed(restart, dismisser, data, status, code):
    response = dismisser.post("/audit/dismiss", data)
    assert response.status_code == status and code in response.content
    assert not ProcessRecord.objects.exclude(dismissed_at=None).exists()


def test_dismissing_needs_the_permission(restart, staff_client):
    assert b'action="/audit/dismiss"' not in staff_client.get("/audit/").content
    response = staff_client.post("/audit/dismiss", {"instance_id": "old"})
    assert response.status_code == 403 and b"fleet.dismiss_process" in response.content
    assert ProcessRecord.objects.get(instance_id="old").dismissed_at is None
    assert AuditEntry.objects.filter(action="audit-dismiss", status=403).count() == 1  # refusals are recorded too
