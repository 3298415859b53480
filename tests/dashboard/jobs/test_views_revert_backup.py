"""``/jobs/backups/revert``: a Revert per backup (a confirmation page, then a revert job and a redirect to it),
and the thread page's jobs and backups with the same Revert link (issue 14, items 3 and 4)."""

from __future__ import annotations

import pytest

from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from deerflow import convert
from tests.dashboard.html import parse
from tests.dashboard.jobs.pages import tags

pytestmark = pytest.mark.django_db


@pytest.fixture
def converted(finished_job):
    job = finished_job("convert", {"thread_ids": ["delta-f10-1t", "delta-f10-9t"]}, confirmed=True)
    return job, {r.thread_id: r.backup_id for r in job.results.all()}


def test_backups_page_offers_a_revert_per_active_backup(converted, manager_client, viewer_client):
    _job, backups = converted
    body = manager_client.get("/jobs/backups/").content.decode()
    links = [a["href"] for a in tags(body, "a", **{"class": "revert"})]
    assert sorted(links) == sorted(f"/jobs/backups/revert?backup_id={b}" for b in backups.values())
    assert not tags(viewer_client.get("/jobs/backups/").content, "a", **{"class": "revert"})


def test_confirmation_then_revert_job_then_redirect(converted, small_db, manager_client):
    job, backups = converted
    backup_id = backups["delta-f10-9t"]
    page = manager_client.get("/jobs/backups/revert", {"backup_id": backup_id})
    assert page.status_code == 200
    doc = parse(page.content)
    confirm = doc.find("section", id="revert-confirm")
    assert "delta-f10-9t" in confirm.text and f"job #{job.pk}" in confirm.text
    assert "Checkpoints written after the conversion" in confirm.text
    assert not ConversionJob.objects.filter(kind="revert").exists()  # the GET wrote nothing
    response = manager_client.post("/jobs/backups/revert", {"backup_id": backup_id})
    revert = ConversionJob.objects.get(kind="revert")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{revert.pk}/"
    assert revert.selection == {"backup_ids": [backup_id]}
    assert list(revert.results.values_list("thread_id", "backup_id")) == [("delta-f10-9t", backup_id)]
    assert services.run_inline(revert).state == "succeeded"
    statuses = {b.backup_id: b.status for b in convert.list_backups(small_db)}
    assert statuses[backup_id] != "active" and statuses[backups["delta-f10-1t"]] == "active"
    # A restored backup cannot be reverted again: said so.
    again = manager_client.get("/jobs/backups/revert", {"backup_id": backup_id})
    assert again.status_code == 409 and b"backup_not_active" in again.content


@pytest.mark.parametrize("data, status", [({}, 400), ({"backup_id": "nope"}, 404)])
def test_bad_backup_ids(converted, manager_client, data, status):
    assert manager_client.get("/jobs/backups/revert", data).status_code == status
    assert manager_client.post("/jobs/backups/revert", data).status_code == status
    assert not ConversionJob.objects.filter(kind="revert").exists()


def test_a_viewer_may_not_revert(converted, viewer_client):
    _job, backups = converted
    page = viewer_client.get("/jobs/backups/revert", {"backup_id": backups["delta-f10-9t"]})
    assert page.status_code == 200 and not tags(page.content, "form", id="revert-form")
    assert viewer_client.post("/jobs/backups/revert", {"backup_id": backups["delta-f10-9t"]}).status_code == 403
    assert not ConversionJob.objects.filter(kind="revert").exists()


def test_thread_page_lists_its_jobs_and_backups_with_revert(converted, manager_client, viewer_client):
    job, backups = converted
    doc = parse(manager_client.get("/threads/delta-f10-9t/").content)
    section = doc.find("section", id="provenance")
    rows = {tr.attrs["data-job-id"]: tr for tr in section.find_all("tr") if "data-job-id" in tr.attrs}
    assert str(job.pk) in rows
    row = rows[str(job.pk)]
    assert backups["delta-f10-9t"] in row.text and "converted" in row.text
    assert row.find("a", cls="revert").attrs["href"] == f"/jobs/backups/revert?backup_id={backups['delta-f10-9t']}"
    # The thread's jobs only; a viewer sees them without the Revert link.
    viewer = parse(viewer_client.get("/threads/delta-f10-9t/").content).find("section", id="provenance")
    assert str(job.pk) in viewer.text and not viewer.find_all("a", cls="revert")
    other = parse(viewer_client.get("/threads/delta-f10-fork/").content).find("section", id="provenance")
    assert "No job has touched this thread." in other.text
