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


def test_replay_depth_quantiles_match_the_thread_lists_depths(served):
    """The quantiles come from the summary's GROUP BY; here they are recomputed from every listed delta thread."""
    import math

    from deerflow import inventory

    depths, cursor = [], None
    while True:
        page, cursor = inventory.list_threads(served.saver, limit=500, cursor=cursor, mode="delta")
        depths += [t.replay_depth for t in page if t.replay_depth is not None]
        if cursor is None:
            break
    depths.sort()
    assert depths and depths[-1] > 0
    scraped = _scrape()
    quantiles = {dict(k)["quantile"]: v for k, v in scraped["deerflow_replay_depth"].items()}
    expected = {str(q): float(depths[max(1, math.ceil(q * len(depths))) - 1]) for q in (0.5, 0.9, 0.99, 1.0)}
    assert quantiles == expected
    assert scraped["deerflow_replay_depth_threads"][()] == len(depths)


def test_summary_age_is_seconds_since_the_last_refresh(served):
    from deerflow.inventory import summary

    summary.refresh(served.saver)
    age = _scrape()["deerflow_summary_age_seconds"][()]
    assert 0 <= age < 60


def test_config_drift_counts_processes_per_kind_and_reports_every_kind(served, db):
    import datetime as dt

    from django.utils import timezone

    from dashboard.fleet.models import ProcessRecord

    now = timezone.now()
    base = {"role": "web", "host": "h", "started_at": now - dt.timedelta(hours=1), "last_heartbeat": now,
            "snapshot_frequency": 10, "config_path": "/etc/deerflow/config.yaml", "config_sha256": "a" * 64,
            "max_supersteps": 5000, "versions": {}, "queues": [], "heartbeat_interval_s": 15.0}
    ProcessRecord.objects.create(**base, instance_id="w1", name="w1", pid=1, mode="delta", disk_sha256="b" * 64,
                                 disk_mode="full", disk_snapshot_frequency=10)  # mid mode-flip
    ProcessRecord.objects.create(**base, instance_id="w2", name="w2", pid=2, mode="delta", disk_sha256="c" * 64,
                                 disk_mode="delta", disk_snapshot_frequency=10)  # edited, same mode and cadence
    drift = {dict(k)["kind"]: v for k, v in _scrape()["deerflow_config_drift"].items()}
    assert drift["config_drift"] == 1.0 and drift["config_edited"] == 1.0
    assert set(drift) == {"config_drift", "config_edited", "config_differs", "config_unreadable"}
    assert drift["config_unreadable"] == 0.0


def test_depth_quantiles_are_nearest_rank():
    from deerflow.inventory.summary.stats import depth_quantiles

    assert depth_quantiles({}) == {}
    assert depth_quantiles({0: 5, 3: 4, 9: 1}) == {0.5: 0, 0.9: 3, 0.99: 9, 1.0: 9}
    assert depth_quantiles({7: 1}, (0.5,)) == {0.5: 7}
    with pytest.raises(ValueError, match=r"quantiles must be in \(0, 1\]"):
        depth_quantiles({1: 1}, (0.0,))
