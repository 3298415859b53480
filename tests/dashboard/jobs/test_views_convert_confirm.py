"""``/jobs/<dry run id>/confirm``: the page before "Convert to full" (issue 14, item 3): the threads it rewrites
with bytes now → after and growth, outliers marked, what cannot be undone; its button posts the conversion."""

from __future__ import annotations

import pytest

from dashboard.jobs.charts import confirm_rows
from dashboard.jobs.models import ConversionJob, ThreadResult
from tests.dashboard.html import parse
from tests.dashboard.jobs.pages import form_inputs, tags

pytestmark = pytest.mark.django_db

THREADS = ["delta-f10-1t", "delta-f10-9t", "delta-f10-10t", "delta-f10-fork", "full-short-3t"]


def test_the_confirmation_lists_every_thread_with_growth(finished_job, manager_client):
    dry = finished_job("dry_run", {"thread_ids": THREADS})
    convertible = list(dry.results.filter(status="needs_conversion"))
    assert len(convertible) == 4
    assert tags(manager_client.get(f"/jobs/{dry.pk}/").content, "a", id="review-conversion")[0]["href"] == \
        f"/jobs/{dry.pk}/confirm"
    response = manager_client.get(f"/jobs/{dry.pk}/confirm")
    assert response.status_code == 200
    doc = parse(response.content)
    assert doc.find("h1").text == "Convert 4 threads to full?"
    rows = {tr.attrs["data-thread-id"]: tr for tr in doc.find("table", id="confirm-threads").find_all("tr")
            if "data-thread-id" in tr.attrs}
    assert set(rows) == {r.thread_id for r in convertible}  # the full thread is not touched
    for r in convertible:
        cells = rows[r.thread_id].find_all("td")
        assert cells[1].text == f"{r.checkpoints_rewritten:,}"
        assert cells[4].text == f"× {r.bytes_after / r.bytes_before:.1f}"
    sizes = [r.bytes_after for r in sorted(convertible, key=lambda r: (-r.bytes_after, r.thread_id))]
    assert [tr.attrs["data-thread-id"] for tr in rows.values()] == [
        r.thread_id for r in sorted(convertible, key=lambda r: (-r.bytes_after, r.thread_id))] and sizes
    assert "revert restores them, until the backup is purged" in doc.find("section", id="conversion-summary").text
    assert "csrfmiddlewaretoken" in form_inputs(response.content, "confirm-convert")
    assert not ConversionJob.objects.filter(kind="convert").exists()  # the page wrote nothing
    # Its button: the conversion job, then the job's page (no POST URL left in the address bar).
    posted = manager_client.post(f"/jobs/{dry.pk}/convert", {"throttle_delay_s": "0", "max_in_flight": "1"})
    job = ConversionJob.objects.get(kind="convert")
    assert posted.status_code == 302 and posted["Location"] == f"/jobs/{job.pk}/"


def test_outliers_are_marked():
    def result(tid, before, after):
        return ThreadResult(thread_id=tid, bytes_before=before, bytes_after=after)

    rows = confirm_rows([result("a", 100, 200), result("b", 100, 210), result("c", 100, 190), result("d", 100, 2000)])
    assert [(r.result.thread_id, r.outlier) for r in rows] == [("d", True), ("b", False), ("a", False), ("c", False)]
    assert rows[0].growth == 20.0
    assert not any(r.outlier for r in confirm_rows([result("a", 1, 100), result("b", 100, 100)]))  # too few to tell


def test_only_a_finished_dry_run_has_a_confirmation(finished_job, manager_client, viewer_client):
    converted = finished_job("convert", {"thread_ids": ["delta-f10-1t"]}, confirmed=True)
    response = manager_client.get(f"/jobs/{converted.pk}/confirm")
    assert response.status_code == 409 and b"not_a_finished_dry_run" in response.content
    assert manager_client.get("/jobs/999999/confirm").status_code == 404
    dry = finished_job("dry_run", {"thread_ids": ["delta-f10-1t"]})
    page = viewer_client.get(f"/jobs/{dry.pk}/confirm")  # readable by any staff; no button without the permission
    assert page.status_code == 200 and not tags(page.content, "form", id="confirm-convert")
