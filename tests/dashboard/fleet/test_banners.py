"""The banner on every page (issue 14, item 5): config drift and an unreadable config.yaml (this process's,
seen on the next request; another process's, from its heartbeat), and a fleet that cannot read some threads
(a full-mode process while delta threads are stored), with the same finding on the audit page."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from dashboard.fleet.models import ProcessRecord
from deerflow import inventory
from tests.configs import write_config
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db


def _banners(client: Client, url: str = "/threads/") -> dict[str, str]:
    response = client.get(url)
    assert response.status_code in (200, 503), (url, response.status_code)
    boxes = parse(response.content).find_all("div", id="banners")
    return {p.attrs["data-code"]: p.text for box in boxes for p in box.find_all("p")}


def _process(name: str, mode: str = "delta", **extra) -> ProcessRecord:
    now = timezone.now()
    values = {"instance_id": name, "role": "web", "name": name, "host": "h1", "pid": 1, "started_at": now,
              "last_heartbeat": now, "mode": mode, "snapshot_frequency": 10, "config_path": "/etc/c.yaml",
              "config_sha256": "a" * 64, **extra}
    return ProcessRecord.objects.create(**values)


def test_no_banner_when_all_agree(runtime_for, sqlite_fixture_db, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    _process("web@h1:1")
    assert _banners(staff_client) == {}


def test_this_process_drift_shows_on_every_page_at_once(runtime_for, sqlite_fixture_db, staff_client):
    rt = runtime_for(sqlite_fixture_db, "delta")
    assert _banners(staff_client) == {}
    write_config(rt.config.path, sqlite_fixture_db, "full")
    for url in ("/threads/", "/jobs/", "/jobs/backups/", "/accounts/tokens/"):
        found = _banners(staff_client, url)
        assert set(found) == {"config_drift"}, url
        assert "checkpoint_channel_mode delta (frozen) ≠ full (on disk)" in found["config_drift"]
        assert "Thread pages answer 503" in found["config_drift"]


def test_this_process_cadence_drift(runtime_for, sqlite_fixture_db, staff_client):
    rt = runtime_for(sqlite_fixture_db, "delta", snapshot_frequency=10)
    write_config(rt.config.path, sqlite_fixture_db, "delta", snapshot_frequency=25)
    assert "snapshot_frequency 10 (frozen) ≠ 25 (on disk)" in _banners(staff_client)["config_drift"]


def test_an_invalid_config_yaml_is_a_warning_banner(runtime_for, sqlite_fixture_db, staff_client):
    rt = runtime_for(sqlite_fixture_db, "delta")
    with open(rt.config.path, "a") as f:
        f.write("\ndatabase: [unclosed\n")
    found = _banners(staff_client)
    assert set(found) == {"config_unreadable"}
    assert "cannot be read" in found["config_unreadable"] and "would not start again" in found["config_unreadable"]
    assert parse(staff_client.get("/threads/").content).find("p", cls="banner").attrs["class"] == \
        "banner severity-warning"


def test_another_process_drift_comes_from_its_heartbeat(runtime_for, sqlite_fixture_db, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    _process("worker@h2:9", disk_mode="full", disk_sha256="b" * 64)
    found = _banners(staff_client)
    assert set(found) == {"config_drift"} and "worker@h2:9 is mid mode-flip" in found["config_drift"]


def test_a_full_mode_fleet_with_delta_threads(runtime_for, sqlite_fixture_db, staff_client):
    rt = runtime_for(sqlite_fixture_db, "full")
    delta = inventory.storage_by_mode(rt.saver)["delta"]["threads"]
    assert delta > 0
    found = _banners(staff_client)
    assert set(found) == {"full_fleet_unreadable_threads"}
    assert f"{delta:,} delta threads cannot be read by the full-mode process this dashboard process: it answers 409" \
        in found["full_fleet_unreadable_threads"]
    # Registered full-mode processes are named instead; the audit raises the same finding.
    _process("web@h1:1", mode="full")
    _process("zagent@h1:2", mode="full", role="external")
    _process("worker@h1:3", mode="full", role="worker")  # a maintenance worker serves no DeerFlow user
    cache.clear()
    named = _banners(staff_client)["full_fleet_unreadable_threads"]
    assert "full-mode processes web@h1:1 and zagent@h1:2: they answer 409" in named
    audit = staff_client.get("/api/audit").json()
    (finding,) = [f for f in audit["findings"] if f["code"] == "full_fleet_unreadable_threads"]
    assert finding["severity"] == "error" and f"{delta:,} delta threads" in finding["message"]
    page = parse(staff_client.get("/audit/").content)
    (shown,) = page.find_all("div", data_code="full_fleet_unreadable_threads")
    assert "severity-error" in shown.attrs["class"]


def test_a_delta_fleet_with_one_live_full_process(runtime_for, sqlite_fixture_db, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    _process("web@old:7", mode="full")
    _process("web@dead:8", mode="full", last_heartbeat=timezone.now() - dt.timedelta(hours=1))  # stale: not counted
    found = _banners(staff_client)
    assert "full-mode process web@old:7: it answers 409" in found["full_fleet_unreadable_threads"]
    assert "mode_mismatch" not in found  # one process only: no disagreement among the serving ones


def test_the_fleet_part_is_cached(runtime_for, sqlite_fixture_db, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    assert _banners(staff_client) == {}
    _process("worker@h2:9", disk_mode="full")
    assert _banners(staff_client) == {}  # reused for CACHE_S seconds
    cache.clear()
    assert set(_banners(staff_client)) == {"config_drift"}


def test_no_banner_for_anonymous_or_non_staff(runtime_for, sqlite_fixture_db, outsider_user):
    rt = runtime_for(sqlite_fixture_db, "delta")
    write_config(rt.config.path, sqlite_fixture_db, "full")
    assert b'id="banners"' not in Client().get("/accounts/login/").content
    client = Client()
    client.force_login(outsider_user)
    assert b'id="banners"' not in client.get("/accounts/login/").content


def test_an_outage_while_computing_the_banner_leaves_the_page_without_it(runtime_for, sqlite_fixture_db, staff_client,
                                                                        monkeypatch):
    import psycopg

    from dashboard.fleet import banners

    def unreachable(rt):
        raise psycopg.OperationalError("connection to server at 127.0.0.1, port 1 failed: Connection refused")

    runtime_for(sqlite_fixture_db, "delta")
    monkeypatch.setattr(banners, "banners", unreachable)
    response = staff_client.get("/jobs/")  # a page that reads no checkpoint: only the banner touched the outage
    assert response.status_code == 200
    assert _banners(staff_client, "/jobs/") == {}


def test_a_ghost_process_drives_no_banner(runtime_for, sqlite_fixture_db, staff_client):
    """The dead web process of a restart (another mode, its file since edited) is gone once its lease ran out:
    no banner says it differs or is mid mode-flip, and the audit lists it as an info only."""
    runtime_for(sqlite_fixture_db, "delta")
    _process("web@h1:1")
    _process("web@h1:0", mode="full", disk_mode="delta", disk_sha256="b" * 64,
             last_heartbeat=timezone.now() - dt.timedelta(seconds=46))
    assert _banners(staff_client) == {}
    findings = {f["code"]: f for f in staff_client.get("/api/audit").json()["findings"]}
    assert findings["process_gone"]["severity"] == "info"
    assert not {"mode_mismatch", "config_drift"} & set(findings)
