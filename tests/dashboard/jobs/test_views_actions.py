"""``POST /jobs/<id>/action``: pause, resume, cancel, retry, revert buttons; permission and CSRF."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import JobOptions
from tests.dashboard.jobs.pages import tags

pytestmark = pytest.mark.django_db

THREE = ["delta-f10-9t", "delta-f10-10t", "delta-f10-fork"]


def _buttons(client, job) -> set[str]:
    return _buttons_of(client, f"/jobs/{job.pk}/")


def _buttons_of(client, url: str) -> set[str]:
    return {b["value"] for b in tags(client.get(url).content, "button", name="action")}


def test_a_running_job_offers_pause_and_cancel(delta_rt, manager_client):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    assert _buttons(manager_client, job) == {"pause", "cancel"}


def test_pause_then_resume(delta_rt, manager_client):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    response = manager_client.post(f"/jobs/{job.pk}/action", {"action": "pause"})
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    job.refresh_from_db()
    assert job.state == "paused" and _buttons(manager_client, job) == {"resume", "cancel"}

    manager_client.post(f"/jobs/{job.pk}/action", {"action": "resume"})
    job.refresh_from_db()
    assert job.state == "running"


def test_cancel_skips_what_has_not_started(delta_rt, manager_client):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    manager_client.post(f"/jobs/{job.pk}/action", {"action": "cancel"})
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert set(job.results.values_list("status", flat=True)) == {"skipped"}
    again = manager_client.post(f"/jobs/{job.pk}/action", {"action": "cancel"})
    assert again.status_code == 409 and b"invalid_transition" in again.content


def test_retry_creates_a_linked_job_for_failed_threads(finished_job, manager_client):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-1t", "nope"]})
    assert _buttons(manager_client, job) == {"retry"}
    response = manager_client.post(f"/jobs/{job.pk}/action", {"action": "retry"}, headers={"HX-Request": "true"})
    retry = ConversionJob.objects.get(parent=job)
    assert response["HX-Redirect"] == f"/jobs/{retry.pk}/"
    assert list(retry.results.values_list("thread_id", flat=True)) == ["nope"]


def test_revert_creates_a_revert_job_over_the_backups(finished_job, manager_client):
    job = finished_job("convert", {"thread_ids": ["delta-f10-1t"]}, confirmed=True)
    assert _buttons(manager_client, job) == set()  # the revert is confirmed first (its own page posts the action)
    assert tags(manager_client.get(f"/jobs/{job.pk}/").content, "a", id="revert-job")
    assert _buttons_of(manager_client, f"/jobs/{job.pk}/revert") == {"revert"}
    manager_client.post(f"/jobs/{job.pk}/action", {"action": "revert"})
    revert = ConversionJob.objects.get(kind="revert")
    backup = job.results.get().backup_id
    assert revert.source_job == job and revert.selection == {"backup_ids": [backup]}
    assert list(revert.results.values_list("thread_id", "backup_id")) == [("delta-f10-1t", backup)]


def test_a_reverted_conversion_no_longer_offers_revert(finished_job, manager_client):
    job = finished_job("convert", {"thread_ids": ["delta-f10-1t"]}, confirmed=True)
    revert = services.run_inline(services.revert(job, None))
    assert revert.state == "succeeded"

    html = manager_client.get(f"/jobs/{job.pk}/").content
    assert _buttons(manager_client, job) == set()
    (note,) = re.findall(r'<span class="muted" id="reverted-by">(.*?)</span>', html.decode(), re.S)
    assert f'Already reverted by <a href="/jobs/{revert.pk}/">job #{revert.pk}</a>' in note

    again = manager_client.post(f"/jobs/{job.pk}/action", {"action": "revert"})
    assert again.status_code == 400 and b"invalid_selection" in again.content
    assert f"Job {job.pk}&#x27;s backups were all restored or purged; there is nothing left to revert." \
        in again.content.decode() and "/jobs/backups/" in again.content.decode()


def test_revert_restores_only_the_backups_still_active(finished_job, manager_client, small_db):
    job = finished_job("convert", {"thread_ids": ["delta-f10-1t", "delta-f10-fork"]}, confirmed=True)
    first = job.results.get(thread_id="delta-f10-1t").backup_id
    services.run_inline(services.create_job(None, "revert", {"backup_ids": [first]}, JobOptions(source_job=job)))
    assert tags(manager_client.get(f"/jobs/{job.pk}/").content, "a", id="revert-job")  # delta-f10-fork's is active
    confirm = manager_client.get(f"/jobs/{job.pk}/revert").content
    assert [a["data-thread-id"] for a in tags(confirm, "tr") if "data-thread-id" in a] == ["delta-f10-fork"]

    manager_client.post(f"/jobs/{job.pk}/action", {"action": "revert"})
    newest = ConversionJob.objects.filter(kind="revert").first()
    assert newest.selection == {"backup_ids": [job.results.get(thread_id="delta-f10-fork").backup_id]}


def test_an_unknown_action_is_a_400(delta_rt, manager_client):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    assert manager_client.post(f"/jobs/{job.pk}/action", {"action": "explode"}).status_code == 400


@pytest.mark.parametrize("action", ["pause", "cancel", "retry", "revert"])
def test_a_viewer_gets_403_on_every_action(delta_rt, viewer_client, action):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    assert viewer_client.post(f"/jobs/{job.pk}/action", {"action": action}).status_code == 403
    job.refresh_from_db()
    assert job.state == "queued"


def test_actions_enforce_csrf(delta_rt, manager):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    assert client.post(f"/jobs/{job.pk}/action", {"action": "cancel"}).status_code == 403
    client.get(f"/jobs/{job.pk}/")
    token = client.cookies["csrftoken"].value
    assert client.post(f"/jobs/{job.pk}/action", {"action": "cancel", "csrfmiddlewaretoken": token}).status_code == 302
