"""The confirmation pages of compaction, a job's revert and a backup's purge (issue 14, item 3): what each
touches, bytes before/after per thread, what cannot be undone; the GET writes nothing, the button's POST
redirects to the job (or the backups page)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from dashboard.fleet.models import ProcessRecord
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import run_inline
from deerflow import convert
from tests.dashboard.html import parse
from tests.dashboard.jobs.pages import form_inputs, tags

pytestmark = pytest.mark.django_db

FULL = ["full-rollback", "full-short-3t"]


def _rows(doc, table_id: str) -> dict:
    return {tr.attrs["data-thread-id"]: tr for tr in doc.find("table", id=table_id).find_all("tr")
            if "data-thread-id" in tr.attrs}


def test_compaction_confirmation_lists_threads_and_posts_the_compaction(finished_job, manager_client):
    dry = finished_job("compact_dry_run", {"thread_ids": [*FULL, "delta-f10-9t"]})
    compactable = list(dry.results.filter(status="needs_compaction"))
    assert sorted(r.thread_id for r in compactable) == FULL
    page = manager_client.get(f"/jobs/{dry.pk}/").content
    assert tags(page, "a", id="review-compaction")[0]["href"] == f"/jobs/{dry.pk}/confirm"
    response = manager_client.get(f"/jobs/{dry.pk}/confirm")
    assert response.status_code == 200
    doc = parse(response.content)
    assert doc.find("h1").text == "Compact 2 threads to delta?"
    rows = _rows(doc, "confirm-threads")
    assert set(rows) == set(FULL)  # the delta thread is not touched
    for r in compactable:
        cells = rows[r.thread_id].find_all("td")
        assert cells[1].text == f"{r.checkpoints_rewritten:,}"
        assert cells[4].text == f"× {r.bytes_after / r.bytes_before:.2f}"
        assert r.bytes_after < r.bytes_before
    freed = sum(r.bytes_before - r.bytes_after for r in compactable)
    assert doc.find("strong", id="confirm-freed").text.replace("\xa0", " ") == _size(freed)
    assert "every full-mode process answers 409" in doc.find("section", id="compaction-summary").text
    assert "csrfmiddlewaretoken" in form_inputs(response.content, "confirm-compact")
    assert not ConversionJob.objects.filter(kind="compact").exists()
    posted = manager_client.post(f"/jobs/{dry.pk}/compact", {"throttle_delay_s": "0", "max_in_flight": "1"})
    job = ConversionJob.objects.get(kind="compact")
    assert posted.status_code == 302 and posted["Location"] == f"/jobs/{job.pk}/"


def _size(n: int) -> str:
    from django.template.defaultfilters import filesizeformat

    return filesizeformat(n).replace("\xa0", " ")


def test_compaction_confirmation_names_live_full_mode_processes(finished_job, manager_client):
    now = timezone.now()
    ProcessRecord.objects.create(instance_id="f1", role="web", name="web@old:7", host="old", pid=7,
                                 started_at=now, last_heartbeat=now, mode="full", snapshot_frequency=10)
    dry = finished_job("compact_dry_run", {"thread_ids": FULL})
    html = manager_client.get(f"/jobs/{dry.pk}/confirm").content
    assert "web@old:7" in parse(html).find("li", id="full-mode-processes").text
    assert form_inputs(html, "confirm-compact").get("force_full_fleet") == "on"


def test_revert_of_a_job_is_confirmed_first(finished_job, small_db, manager_client, viewer_client):
    job = finished_job("convert", {"thread_ids": ["delta-f10-1t", "delta-f10-9t"]}, confirmed=True)
    page = manager_client.get(f"/jobs/{job.pk}/").content
    assert tags(page, "a", id="revert-job")[0]["href"] == f"/jobs/{job.pk}/revert"
    assert not tags(page, "button", value="revert")  # no one-click revert left on the job page
    response = manager_client.get(f"/jobs/{job.pk}/revert")
    assert response.status_code == 200
    doc = parse(response.content)
    rows = _rows(doc, "revert-threads")
    backups = {b.backup_id: b for b in convert.list_backups(small_db)}
    assert set(rows) == {"delta-f10-1t", "delta-f10-9t"}
    for tid, tr in rows.items():
        backup = backups[tr.attrs["data-backup-id"]]
        assert backup.thread_id == tid and f"{backup.checkpoint_rows:,} checkpoints" in tr.text
    assert "Checkpoints written after the job" in doc.find("section", id="revert-job-confirm").text
    assert not ConversionJob.objects.filter(kind="revert").exists()
    assert not tags(viewer_client.get(f"/jobs/{job.pk}/revert").content, "form", id="revert-job-form")
    posted = manager_client.post(f"/jobs/{job.pk}/action", {"action": "revert"})
    revert = ConversionJob.objects.get(kind="revert")
    assert posted.status_code == 302 and posted["Location"] == f"/jobs/{revert.pk}/"
    assert run_inline(revert).state == "succeeded"
    again = manager_client.get(f"/jobs/{job.pk}/revert")
    assert again.status_code == 409 and b"nothing_to_revert" in again.content


def test_only_a_finished_write_job_has_a_revert_confirmation(finished_job, manager_client):
    dry = finished_job("dry_run", {"thread_ids": ["delta-f10-1t"]})
    response = manager_client.get(f"/jobs/{dry.pk}/revert")
    assert response.status_code == 409 and b"not_revertible" in response.content
    assert manager_client.get("/jobs/999999/revert").status_code == 404
    assert manager_client.get("/jobs/999999/confirm").status_code == 404


def test_purge_confirmation_says_what_is_lost(finished_job, small_db, manager_client, viewer_client):
    job = finished_job("convert", {"thread_ids": ["delta-f10-9t"]}, confirmed=True)
    (backup,) = convert.list_backups(small_db)
    response = manager_client.get("/jobs/backups/purge", {"backup_id": backup.backup_id})
    assert response.status_code == 200
    doc = parse(response.content)
    section = doc.find("section", id="purge-confirm")
    assert "The thread can no longer be reverted" in section.text and f"job #{job.pk}" in section.text
    assert doc.find("td", id="purge-bytes").attrs["title"] == f"{backup.bytes:,} bytes"
    assert form_inputs(response.content, "purge-form")["backup_id"] == backup.backup_id
    assert {b.status for b in convert.list_backups(small_db)} == {"active"}  # the GET deleted nothing
    assert not tags(viewer_client.get("/jobs/backups/purge", {"backup_id": backup.backup_id}).content,
                    "form", id="purge-form")
    manager_client.post("/jobs/backups/purge", {"backup_id": backup.backup_id, "confirm": "on"})
    gone = manager_client.get("/jobs/backups/purge", {"backup_id": backup.backup_id})
    assert gone.status_code == 409 and b"backup_not_active" in gone.content


@pytest.mark.parametrize("data, status", [({}, 400), ({"backup_id": "nope"}, 404)])
def test_purge_confirmation_bad_ids(delta_rt, manager_client, data, status):
    assert manager_client.get("/jobs/backups/purge", data).status_code == status
