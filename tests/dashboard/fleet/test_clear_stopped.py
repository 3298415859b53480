"""Stopped processes leave the audit page: by themselves 24 hours after their clean stop
(``STOPPED_RETENTION``), or at once by ``POST /audit/clear-stopped`` (``fleet.dismiss_process``, CSRF,
audited). A stopped process never drives a banner, listed or not; its registry row stays for the stall sweep."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from dashboard.accounts.models import AuditEntry
from dashboard.fleet.models import ProcessRecord
from dashboard.fleet.processes import STOPPED_RETENTION, process_rows
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db


def _process(instance_id: str, *, stopped_ago: dt.timedelta | None = None, **extra) -> ProcessRecord:
    now = timezone.now()
    values = {"instance_id": instance_id, "role": "web", "name": f"web@h1:{instance_id}", "host": "h1", "pid": 1,
              "started_at": now - dt.timedelta(days=3), "last_heartbeat": now, "mode": "delta",
              "snapshot_frequency": 10, "config_path": "/etc/c.yaml", "config_sha256": "a" * 64,
              "stopped_at": None if stopped_ago is None else now - stopped_ago, **extra}
    if stopped_ago is not None:
        values["last_heartbeat"] = values["stopped_at"]
    return ProcessRecord.objects.create(**values)


@pytest.fixture
def fleet(runtime_for, sqlite_fixture_db):
    """A live delta process, one gone, and three stopped ones in full mode: two within the retention, one past it."""
    runtime_for(sqlite_fixture_db, "delta")
    _process("live")
    _process("gone", last_heartbeat=timezone.now() - dt.timedelta(hours=1), host="h2")
    for name, ago in (("stop-1", dt.timedelta(minutes=5)), ("stop-2", dt.timedelta(hours=23)),
                      ("stop-old", STOPPED_RETENTION + dt.timedelta(minutes=1))):
        _process(name, stopped_ago=ago, mode="full", disk_mode="delta", disk_sha256="b" * 64, host="h3")


@pytest.fixture
def operator(django_user_model) -> Client:
    user = django_user_model.objects.create_user("operator", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="dismiss_process"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _listed(client: Client) -> dict[str, str]:
    page = parse(client.get("/audit/").content)
    return {tr.attrs["data-instance-id"]: tr.find("td", cls="process-state").text.split()[0]
            for tr in page.find("table", id="processes").find("tbody").find_all("tr")}


def _csrf(client: Client) -> str:
    form = parse(client.get("/audit/").content).find("form", cls="clear-stopped")
    assert form.attrs["action"] == "/audit/clear-stopped"
    return form.find("input", name="csrfmiddlewaretoken").attrs["value"]


def test_a_stopped_process_is_listed_for_24_hours_after_its_stop(fleet, staff_client):
    assert _listed(staff_client) == {"live": "live", "gone": "gone", "stop-1": "stopped", "stop-2": "stopped"}
    assert "2 processes stopped cleanly" in parse(staff_client.get("/audit/").content).find(
        "p", id="stopped-processes").text
    assert ProcessRecord.objects.filter(instance_id="stop-old").exists()  # hidden, not deleted


def test_clearing_takes_every_stopped_process_off_the_list_and_is_audited(fleet, operator):
    response = operator.post("/audit/clear-stopped", {"csrfmiddlewaretoken": _csrf(operator)})
    assert response.status_code == 302 and response["Location"] == "/audit/"
    assert _listed(operator) == {"live": "live", "gone": "gone"}  # a gone process is dismissed one by one
    assert sorted(ProcessRecord.objects.filter(dismissed_by="operator").values_list("instance_id", flat=True)) == [
        "stop-1", "stop-2", "stop-old"]
    assert {r["instance_id"] for r in operator.get("/api/audit").json()["processes"]} == {"live", "gone"}
    assert parse(operator.get("/audit/").content).find_all("p", id="stopped-processes") == []
    (entry,) = AuditEntry.objects.filter(action="audit-clear-stopped")
    assert (entry.username, entry.method, entry.status) == ("operator", "POST", 302)


def test_clearing_needs_the_csrf_token(fleet, operator):
    assert operator.post("/audit/clear-stopped").status_code == 403
    assert _listed(operator)["stop-1"] == "stopped"


def test_clearing_needs_the_permission(fleet, staff_client):
    assert b'action="/audit/clear-stopped"' not in staff_client.get("/audit/").content
    response = staff_client.post("/audit/clear-stopped")
    assert response.status_code == 403 and b"fleet.dismiss_process" in response.content
    assert b"not clear stopped processes" in response.content
    assert not ProcessRecord.objects.exclude(dismissed_at=None).exists()
    assert AuditEntry.objects.filter(action="audit-clear-stopped", status=403).count() == 1


def test_a_restart_after_the_clear_lists_it_again(fleet, operator):
    operator.post("/audit/clear-stopped", {"csrfmiddlewaretoken": _csrf(operator)})
    from dashboard.fleet.registry import save_facts

    save_facts("stop-1", {"role": "web", "host": "h3", "pid": 1, "mode": "delta", "snapshot_frequency": 10})
    assert _listed(operator)["stop-1"] == "live"


def test_a_stopped_process_never_drives_a_banner(fleet, staff_client):
    """Three stopped full-mode processes whose config.yaml drifted to delta: no drift, no unreadable-threads
    banner while they are listed, none after they leave, and the audit's findings name none of them."""
    def banners() -> set[str]:
        cache.clear()
        page = parse(staff_client.get("/threads/").content)
        return {p.attrs["data-code"] for box in page.find_all("div", id="banners") for p in box.find_all("p")}

    assert banners() == set()
    findings = staff_client.get("/api/audit").json()["findings"]
    assert not [f for f in findings if "stop-" in f["message"] + f["evidence"]]
    ProcessRecord.objects.filter(stopped_at__isnull=False).update(
        stopped_at=timezone.now() - 2 * STOPPED_RETENTION)
    assert banners() == set()


def test_a_restart_stays_recognised_after_its_successor_stopped_long_ago(runtime_for, sqlite_fixture_db):
    """A killed process's row stays ``superseded`` (not ``gone``) when the process that replaced it has since
    stopped and left the list."""
    runtime_for(sqlite_fixture_db, "delta")
    now = timezone.now()
    _process("killed", started_at=now - dt.timedelta(days=5), last_heartbeat=now - dt.timedelta(days=4))
    _process("successor", started_at=now - dt.timedelta(days=4), stopped_ago=dt.timedelta(days=2))
    rows = {r["instance_id"]: r for r in process_rows()}
    assert set(rows) == {"killed"}
    assert (rows["killed"]["state"], rows["killed"]["superseded_by"]) == ("superseded", "web@h1:successor")
