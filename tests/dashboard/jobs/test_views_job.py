"""``/jobs/``, ``/jobs/<id>/`` and its polled progress fragment; "Convert to full" step 2 (confirmation)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from dashboard.errors.jobs import NotADryRun
from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from tests.dashboard.jobs.pages import form_inputs, tags

pytestmark = pytest.mark.django_db

THREE = ["delta-f10-9t", "delta-f10-10t", "delta-f10-fork"]


def test_the_jobs_list_shows_state_and_progress(finished_job, viewer_client):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-1t", "nope"]})
    body = viewer_client.get("/jobs/").content.decode()
    assert f'href="/jobs/{job.pk}/"' in body and "partially failed" in body and "1 failed" in body
    assert tags(body, "progress", value="100.0")
    assert [a["href"] for a in tags(body, "a", id="policies-link")] == ["/jobs/policies/"]


def test_a_running_job_page_polls_its_fragment_every_two_seconds(delta_rt, viewer_client):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    html = viewer_client.get(f"/jobs/{job.pk}/").content
    (poller,) = tags(html, "div", id="job")
    assert poller["hx-get"] == f"/jobs/{job.pk}/progress" and poller["hx-trigger"] == "every 2s"
    assert tags(html, "div", id="worker-status")[0]["hx-get"] == "/jobs/workers"

    fragment = viewer_client.get(f"/jobs/{job.pk}/progress", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert tags(fragment.content, "div", id="job")[0]["hx-trigger"] == "every 2s"
    assert b"<html" not in fragment.content


def test_the_fragment_stops_polling_with_286_when_the_job_is_done(finished_job, viewer_client):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-1t"]})
    fragment = viewer_client.get(f"/jobs/{job.pk}/progress", headers={"HX-Request": "true"})

    assert fragment.status_code == 286
    (div,) = tags(fragment.content, "div", id="job")
    assert "hx-trigger" not in div and "hx-get" not in div
    assert b"Succeeded" in fragment.content and b"delta-f10-1t" in fragment.content


def test_progress_counts_while_a_job_runs(delta_rt, viewer_client):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    ((first,), _), = services.claim_batch(job.pk).sends
    services.run_thread(first)
    body = viewer_client.get(f"/jobs/{job.pk}/progress").content.decode()
    assert "<strong>1 / 3 threads</strong> done" in body and "threads/min" in body
    assert tags(body, "progress", id="job-progress", value="33.3")


def test_results_show_outcome_worker_and_hint(runtime_for, small_db, viewer_client):
    runtime_for(small_db, "full")
    job = services.run_inline(services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-9t"]}))
    body = viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Thread delta-f10-9t: Thread requires delta mode; materialize and convert its checkpoints " \
           "before using full mode." in body
    assert "checkpoints.delta" in body and 'class="badge mode-full"' in body
    assert tags(body, "tr", data_thread_id="delta-f10-9t", data_status="refused")


def test_a_finished_dry_run_shows_the_estimate_and_the_confirmation(finished_job, manager_client):
    dry = finished_job("dry_run", {"thread_ids": [*THREE, "full-short-3t"]})
    html = manager_client.get(f"/jobs/{dry.pk}/").content
    assert tags(html, "section", id="estimate")
    assert b"3 threads can be converted" in html
    assert not tags(html, "form", id="confirm-convert")  # the confirmation page is the only way to convert
    assert tags(html, "a", id="review-conversion")[0]["href"] == f"/jobs/{dry.pk}/confirm"
    inputs = form_inputs(manager_client.get(f"/jobs/{dry.pk}/confirm").content, "confirm-convert")
    assert "csrfmiddlewaretoken" in inputs and "confirm_size" not in inputs  # under the limit


def test_confirming_launches_the_conversion_with_the_estimate(finished_job, manager_client, manager):
    dry = finished_job("dry_run", {"thread_ids": [*THREE, "full-short-3t"]})
    response = manager_client.post(f"/jobs/{dry.pk}/convert", {"throttle_delay_s": "0.5", "max_in_flight": "2"})

    job = ConversionJob.objects.get(kind="convert")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert (job.source_job, job.created_by, job.max_in_flight, job.throttle_delay_s) == (dry, manager, 2, 0.5)
    assert job.estimate["threads"] == 3 and sorted(job.selection["thread_ids"]) == sorted(THREE)
    assert f"#{job.pk}".encode() in manager_client.get(f"/jobs/{dry.pk}/").content  # linked as follow-up


def test_an_estimate_above_the_limit_needs_the_size_confirmation(finished_job, manager_client):
    dry = finished_job("dry_run", {"thread_ids": THREE}, size_limit_bytes=1000)
    assert "confirm_size" in form_inputs(manager_client.get(f"/jobs/{dry.pk}/confirm").content, "confirm-convert")

    refused = manager_client.post(f"/jobs/{dry.pk}/convert", {})
    assert refused.status_code == 409 and b"size_limit_exceeded" not in refused.content
    assert b"above the size limit" in refused.content and not ConversionJob.objects.filter(kind="convert").exists()
    accepted = manager_client.post(f"/jobs/{dry.pk}/convert", {"confirm_size": "on"})
    assert accepted.status_code == 302 and ConversionJob.objects.get(kind="convert").confirmed


def test_a_viewer_sees_no_buttons_and_may_not_confirm(finished_job, viewer_client):
    dry = finished_job("dry_run", {"thread_ids": THREE})
    html = viewer_client.get(f"/jobs/{dry.pk}/").content
    assert not tags(html, "form", id="confirm-convert") and not tags(html, "button", name="action")
    assert viewer_client.post(f"/jobs/{dry.pk}/convert", {}).status_code == 403


def test_confirmation_enforces_csrf(finished_job, manager):
    dry = finished_job("dry_run", {"thread_ids": ["delta-f10-1t"]})
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    assert client.post(f"/jobs/{dry.pk}/convert", {}).status_code == 403
    token = form_inputs(client.get(f"/jobs/{dry.pk}/confirm").content, "confirm-convert")["csrfmiddlewaretoken"]
    assert client.post(f"/jobs/{dry.pk}/convert", {"csrfmiddlewaretoken": token}).status_code == 302


def test_the_job_page_shows_the_selection_in_words(finished_job, viewer_client):
    by_id = finished_job("dry_run", {"thread_ids": ["delta-f10-1t", "nope"]})
    by_filter = finished_job("dry_run", {"filter": {"q": "f10-1", "mode": "delta"}})

    def shown(job) -> str:
        body = viewer_client.get(f"/jobs/{job.pk}/").content.decode()
        return re.search(r'<dd id="job-selection">(.*?)</dd>', body, re.S).group(1)

    assert shown(by_id) == "threads: delta-f10-1t, nope"
    assert shown(by_filter) == "filter: mode = delta, q = f10-1"


def test_a_cancelled_job_counts_its_skipped_threads_apart(delta_rt, viewer_client):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    ((first,), _), = services.claim_batch(job.pk).sends
    services.run_thread(first)
    services.cancel(job)
    job.refresh_from_db()
    assert job.state == "cancelled"

    listing = viewer_client.get("/jobs/").content.decode()
    row = re.search(rf'<tr data-job-id="{job.pk}">.*?</tr>', listing, re.S).group(0)
    assert "1 / 3 done" in row and "2 skipped" in row and "3 / 3" not in row
    assert tags(row, "progress", value="33.3")
    page = viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "<strong>1 / 3 threads</strong> done" in page and "2 skipped" in page
    assert tags(page, "progress", id="job-progress", value="33.3")


def test_converting_from_a_job_that_is_not_a_finished_dry_run_says_why(finished_job, manager_client):
    conversion = finished_job("convert", {"thread_ids": ["delta-f10-1t"]}, confirmed=True)
    response = manager_client.post(f"/jobs/{conversion.pk}/convert", {})

    assert response.status_code == 400
    (detail,) = re.findall(r'<p class="detail" id="error-detail">(.*?)</p>', response.content.decode())
    assert detail == f"Job {conversion.pk} is not a finished dry run; start a conversion from a dry run&#x27;s page."
    assert NotADryRun.page_hint in response.content.decode()
    assert ConversionJob.objects.filter(kind="convert").count() == 1


def test_converting_from_an_unfinished_dry_run_says_why(delta_rt, manager_client):
    dry = services.create_job(None, "dry_run", {"thread_ids": THREE})
    response = manager_client.post(f"/jobs/{dry.pk}/convert", {}, headers={"HX-Request": "true"})
    assert response.status_code == 400
    assert f"Job {dry.pk} is not a finished dry run" in response.content.decode()
    assert b"<html" not in response.content  # the error fragment, for htmx


def test_unknown_jobs_are_404_and_pages_need_staff(delta_rt, viewer_client, django_user_model):
    assert viewer_client.get("/jobs/999/").status_code == 404
    assert Client().get("/jobs/").status_code == 302


@pytest.mark.parametrize("throttle", ["-1", "99999", "soon"])
def test_an_out_of_range_throttle_renders_the_confirmation_again_with_the_field_error(finished_job, manager_client,
                                                                                       throttle):
    dry = finished_job("dry_run", {"thread_ids": THREE})
    response = manager_client.post(f"/jobs/{dry.pk}/convert", {"throttle_delay_s": throttle, "max_in_flight": "1"})
    html = response.content
    assert response.status_code == 400 and not ConversionJob.objects.filter(kind="convert").exists()
    (error,) = tags(html, "li", data_field="throttle_delay_s")
    assert b"Convert 3 threads to full?" in html and tags(html, "form", id="confirm-convert")  # the page, again
    assert form_inputs(html, "confirm-convert")["throttle_delay_s"] == throttle  # what was typed, kept
    assert b"Ensure this value is" in html or b"Enter a number." in html
