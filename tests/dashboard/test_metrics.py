"""``GET /metrics``: Prometheus exposition behind ``DASHBOARD_METRICS_TOKEN``; the figures match the audit API."""

from __future__ import annotations

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from dashboard.accounts.models import ApiToken

pytestmark = pytest.mark.django_db

TOKEN = "metrics-test-token"


@pytest.fixture
def served(sqlite_fixture_db, runtime_for, settings):
    settings.DASHBOARD_METRICS_TOKEN = TOKEN
    return runtime_for(sqlite_fixture_db, "delta")


def _scrape() -> dict[str, dict[tuple, float]]:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_the_figures_match_the_audit_api(served, staff_user):
    from dashboard.jobs.models import ConversionJob

    ConversionJob.objects.create(kind="dry_run", selection={"thread_ids": ["delta-f10-1t"]})
    ConversionJob.objects.create(kind="convert", selection={"thread_ids": ["delta-f10-1t"]}, state="cancelled")
    import json

    from django.contrib.auth.models import Permission

    staff_user.user_permissions.add(Permission.objects.get(codename="report_heartbeat"))
    _, raw = ApiToken.issue(staff_user)
    beat = {"instance_id": "e" * 32, "host": "gw", "pid": 9, "mode": "full", "snapshot_frequency": 10}
    assert Client().post("/api/processes/heartbeat", json.dumps(beat), content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    audit = Client().get("/api/audit", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    scraped = _scrape()
    census = {dict(k)["thread_class"]: v for k, v in scraped["deerflow_threads"].items()}
    assert census == {k: float(v) for k, v in audit["census"].items()}
    assert sum(census.values()) > 0
    by_mode = {dict(k)["mode"]: v for k, v in scraped["deerflow_threads_by_mode"].items()}
    assert by_mode["delta"] + by_mode["full"] == sum(census.values())
    assert all(v > 0 for v in scraped["deerflow_thread_bytes"].values())
    jobs = {(dict(k)["kind"], dict(k)["state"]): v for k, v in scraped["deerflow_jobs"].items()}
    assert jobs == {("dry_run", "queued"): 1.0, ("convert", "cancelled"): 1.0}
    processes = scraped["deerflow_fleet_processes"]
    assert sum(processes.values()) == len(audit["processes"]) >= 1
    assert processes[(("mode", "full"), ("role", "external"), ("snapshot_frequency", "10"), ("state", "live"))] == 1
    findings = sum(scraped.get("deerflow_audit_findings", {}).values())
    assert findings == len(audit["findings"])


def test_without_the_token_it_is_401(served):
    for header in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": TOKEN}):
        response = Client().get("/metrics", **header)
        assert response.status_code == 401 and response.json()["code"] == "invalid_metrics_token"


def test_metrics_are_off_without_a_configured_token(sqlite_fixture_db, runtime_for, settings):
    runtime_for(sqlite_fixture_db, "delta")
    settings.DASHBOARD_METRICS_TOKEN = ""
    response = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ")
    assert response.status_code == 404 and response.json()["code"] == "metrics_disabled"
