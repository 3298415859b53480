"""A launch the deployment cannot run now is refused with the reason and what fixes it, never accepted to wait:
no live worker (503 ``no_live_worker``), or config.yaml drifted under this process (503, the thread pages'
answer and hint). Nothing is created either way."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from tests.configs import write_config
from tests.conftest import register_live_worker
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

START = "celery -A dashboard worker -Q dashboard"


@pytest.fixture
def live_maintenance_worker() -> None:
    """No worker registered unless a test makes one."""
    return None


def _api_launch(client):
    return client.post("/api/jobs", {"kind": "dry_run", "thread_ids": ["delta-f10-9t"]},
                       content_type="application/json")


def test_the_api_refuses_a_job_no_worker_can_run(delta_rt, manager_client):
    response = _api_launch(manager_client)
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "no_live_worker"
    assert body["detail"].startswith("Not launched: No Celery worker has sent a heartbeat")
    assert START in body["hint"] and "whatever mode it names" in body["hint"]
    assert not ConversionJob.objects.exists()


def test_the_launch_page_refuses_it_too(delta_rt, manager_client):
    response = manager_client.post("/jobs/launch", {"thread_id": ["delta-f10-9t"]})
    assert response.status_code == 503
    text = parse(response.content).text
    assert "No Celery worker has sent a heartbeat" in text and START in text
    assert not ConversionJob.objects.exists()


def test_a_gone_worker_does_not_count(delta_rt, manager_client):
    register_live_worker("celery@dead", last_heartbeat=timezone.now() - dt.timedelta(minutes=5))
    assert _api_launch(manager_client).json()["code"] == "no_live_worker"
    register_live_worker("celery@old-full", mode="full", queues=["dashboard", "checkpoints.full"])
    body = _api_launch(manager_client).json()
    assert body["code"] == "no_live_worker" and "celery@old-full (full mode)" in body["detail"]
    assert body["hint"].startswith("Restart them.")


def test_a_live_worker_admits_it(delta_rt, manager_client):
    register_live_worker()
    response = _api_launch(manager_client)
    assert response.status_code == 201 and response.json()["state"] == "queued"


def test_an_inline_job_needs_no_worker(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-9t"]},
                              services.JobOptions(launched_by="cli", runner="inline"))
    assert job.state == "queued"


@pytest.mark.parametrize("url", ["/api/jobs", "/jobs/launch"])
def test_a_launch_during_config_drift_answers_the_thread_pages_503(delta_rt, small_db, manager_client, url):
    register_live_worker()
    write_config(delta_rt.config.path, small_db, "full")
    thread_page = manager_client.get("/threads/delta-f10-9t/")
    assert thread_page.status_code == 503
    if url == "/api/jobs":
        response = _api_launch(manager_client)
        body = response.json()
        assert body["code"] == "checkpoint_mode_reconfiguration"
        assert body["detail"] == "checkpoint_channel_mode is restart-required and cannot change in a running process"
        assert "Restart" in body["hint"] or "restart" in body["hint"]
    else:
        response = manager_client.post(url, {"thread_id": ["delta-f10-9t"]})
        assert "checkpoint_channel_mode is restart-required" in parse(response.content).text
    assert response.status_code == 503
    assert not ConversionJob.objects.exists()
