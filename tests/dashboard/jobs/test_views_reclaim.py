""""Reclaim disk space…" (issue 11, item 5): offered after a compaction (and on the backups page, after a purge),
its confirmation page (what it locks, the disk it needs, the sizes now), the reclaim job with the sizes before
and after recorded on the job and shown; permission as for compaction; bad requests answered, never a 500."""

from __future__ import annotations

import pytest

from dashboard.jobs import reclaiming, services
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import run_inline
from deerflow.convert import list_backups, purge_backup
from deerflow.convert.reclaim import database_sizes
from tests.dashboard.jobs.pages import form_inputs, tags

pytestmark = pytest.mark.django_db


def _compacted(finished_job) -> ConversionJob:
    dry = finished_job("compact_dry_run", {"thread_ids": ["full-rollback", "full-short-3t"]})
    job = finished_job("compact", source_job=dry)
    assert job.state == "succeeded" and {r.status for r in job.results.all()} == {"compacted"}
    return job


def test_a_finished_compaction_offers_reclaim_and_the_whole_path_shrinks_the_file(finished_job, small_db,
                                                                                   manager_client):
    job = _compacted(finished_job)
    page = manager_client.get(f"/jobs/{job.pk}/").content
    (link,) = tags(page, "a", id="reclaim-job")
    assert link["href"] == f"/jobs/reclaim?source_job={job.pk}"

    confirm = manager_client.get(link["href"])
    html = confirm.content.decode()
    assert confirm.status_code == 200
    sizes = database_sizes(small_db)
    assert 'id="reclaim-statement">VACUUM</code>' in html
    assert "holds the database's write lock for its whole duration" in html
    assert "It needs free disk equal to the file" in html
    assert f'title="{sizes["file"] + sizes["wal"]:,} bytes"' in html  # the total now
    assert "2 backups of job" in html  # still active: their rows keep the space
    assert form_inputs(confirm.content, "reclaim-form")["source_job"] == str(job.pk)

    for b in list_backups(small_db):
        purge_backup(small_db, b.backup_id)
    response = manager_client.post("/jobs/reclaim", {"source_job": job.pk, "confirm": "on"})
    reclaim = ConversionJob.objects.get(kind="reclaim")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{reclaim.pk}/"
    assert (reclaim.source_job_id, reclaim.selection, reclaim.reclaim) == (
        job.pk, {"database": "sqlite"}, {"full": False})
    reclaim = run_inline(reclaim)
    assert reclaim.state == "succeeded"
    report = reclaim.reclaim
    assert report["statement"] == "VACUUM" and set(report["sizes_before"]) == {"file", "wal"}
    assert report["bytes_after"] == sum(database_sizes(small_db).values()) < report["bytes_before"]
    row = reclaim.results.get()
    assert (row.thread_id, row.status, row.bytes_before, row.bytes_after) == (
        "", "reclaimed", report["bytes_before"], report["bytes_after"])

    page = manager_client.get(f"/jobs/{reclaim.pk}/").content.decode()
    assert f'id="reclaim-before" data-bytes="{report["bytes_before"]}"' in page
    assert f'id="reclaim-after" data-bytes="{report["bytes_after"]}"' in page
    assert f'id="reclaim-freed" data-bytes="{report["bytes_freed"]}"' in page
    assert "the whole checkpoint database (sqlite)" in page and 'id="results"' not in page
    (cell,) = tags(manager_client.get("/jobs/").content, "td", **{"class": "num job-bytes"},
                   data_before=str(report["bytes_before"]))  # the jobs list: the file's bytes before -> after
    assert cell["data-after"] == str(report["bytes_after"])


def test_a_dry_run_or_a_conversion_that_wrote_nothing_offers_no_reclaim(finished_job, manager_client):
    dry = finished_job("compact_dry_run", {"thread_ids": ["full-short-3t"]})
    assert tags(manager_client.get(f"/jobs/{dry.pk}/").content, "a", id="reclaim-job") == []


def test_the_backups_page_offers_reclaim_after_a_purge(delta_rt, manager_client):
    (link,) = tags(manager_client.get("/jobs/backups/").content, "a", id="reclaim-link")
    assert link["href"] == "/jobs/reclaim"
    assert manager_client.get("/jobs/reclaim").status_code == 200


def test_an_unticked_confirmation_renders_the_page_again_with_400(delta_rt, manager_client):
    response = manager_client.post("/jobs/reclaim", {})
    assert response.status_code == 400 and b'id="reclaim-unconfirmed"' in response.content
    assert not ConversionJob.objects.filter(kind="reclaim").exists()


def test_vacuum_full_on_sqlite_is_refused(delta_rt, manager_client):
    response = manager_client.post("/jobs/reclaim", {"confirm": "on", "full": "on"})
    assert response.status_code == 400 and b"VACUUM FULL is for Postgres" in response.content
    assert not ConversionJob.objects.filter(kind="reclaim").exists()


def test_bad_fields_and_unknown_jobs(delta_rt, manager_client):
    assert manager_client.get("/jobs/reclaim?source_job=abc").status_code == 400
    assert manager_client.get("/jobs/reclaim?source_job=99999").status_code == 404


def test_a_viewer_may_read_the_page_but_not_reclaim(delta_rt, viewer_client):
    page = viewer_client.get("/jobs/reclaim")
    assert page.status_code == 200 and b'id="reclaim-form"' not in page.content
    response = viewer_client.post("/jobs/reclaim", {"confirm": "on"})
    assert response.status_code == 403 and b"jobs.manage_conversions" in response.content
    assert not ConversionJob.objects.filter(kind="reclaim").exists()


def test_a_reclaim_with_no_disk_for_the_copy_is_an_error_with_a_hint(delta_rt, monkeypatch):
    job = reclaiming.create_reclaim_job(None, launched_by="test", runner="inline")

    def no_space(database, *, full=False):
        import sqlite3
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(reclaiming, "reclaim_space", no_space)  # a full disk cannot be arranged in a test
    job = run_inline(job)
    row = job.results.get()
    assert (job.state, row.status, row.error) == ("failed", "error", "database or disk is full")
    assert row.hint == reclaiming.NO_DISK_HINT and job.reclaim == {"full": False}
    retried = services.retry(job, None)
    assert (retried.kind, retried.parent_id, retried.results.get().thread_id) == ("reclaim", job.pk, "")
