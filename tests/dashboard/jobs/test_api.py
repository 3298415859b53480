"""JSON API: ``GET /api/jobs``, ``GET /api/jobs/<id>``, ``POST /api/jobs`` (token or session + CSRF, permission)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from dashboard.accounts.models import ApiToken
from dashboard.jobs.api import JOB_BODY_HINT
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import run_inline

pytestmark = pytest.mark.django_db


def _bearer(user) -> dict:
    return {"Authorization": f"Bearer {ApiToken.issue(user)[1]}"}


def _post(client: Client, body, **headers):
    return client.post("/api/jobs", json.dumps(body), content_type="application/json", headers=headers)


def test_get_lists_jobs_with_progress(finished_job, viewer):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-1t", "nope"]})
    data = Client().get("/api/jobs", headers=_bearer(viewer)).json()
    (row,) = data["jobs"]
    assert row["id"] == job.pk and row["state"] == "partially_failed" and row["kind"] == "dry_run"
    assert row["progress"]["done"] == 2 and row["progress"]["failed"] == 1 and row["progress"]["percent"] == 100.0


def test_get_one_job_has_its_results_and_workers(finished_job, viewer):
    job = finished_job("convert", {"thread_ids": ["delta-f10-1t"]}, confirmed=True)
    data = Client().get(f"/api/jobs/{job.pk}", headers=_bearer(viewer)).json()
    (result,) = data["results"]
    assert result["thread_id"] == "delta-f10-1t" and result["status"] == "converted" and result["backup_id"]
    assert result["worker_mode"] == "delta" and result["worker_snapshot_frequency"] == 10 and result["worker_pid"]
    assert len(result["head_messages_sha256"]) == 64 and result["finished_at"]


def test_unknown_job_is_a_json_404(delta_rt, viewer):
    response = Client().get("/api/jobs/999", headers=_bearer(viewer))
    assert response.status_code == 404 and response.json()["code"] == "job_not_found"


def test_without_credentials_it_is_401(delta_rt):
    assert Client().get("/api/jobs").status_code == 401
    assert _post(Client(), {"kind": "dry_run", "thread_ids": ["x"]}).status_code == 401


def test_post_with_a_token_creates_and_launches_a_job(delta_rt, manager):
    response = _post(Client(), {"kind": "dry_run", "thread_ids": ["delta-f10-9t"], "max_in_flight": 2,
                                "throttle_delay_s": 1.5}, **_bearer(manager))
    assert response.status_code == 201, response.content
    data = response.json()
    job = ConversionJob.objects.get(pk=data["id"])
    assert (job.kind, job.created_by, job.max_in_flight, job.throttle_delay_s) == ("dry_run", manager, 2, 1.5)
    assert data["selection"] == {"thread_ids": ["delta-f10-9t"]} and data["state"] == "queued"


def test_post_convert_from_an_estimate_job(finished_job, manager):
    dry = finished_job("dry_run", {"thread_ids": ["delta-f10-1t", "full-short-3t"]})
    data = _post(Client(), {"kind": "convert", "estimate_job": dry.pk}, **_bearer(manager)).json()
    assert data["selection"] == {"thread_ids": ["delta-f10-1t"]} and data["estimate"]["threads"] == 1


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"kind": "convert", "thread_ids": ["delta-f10-1t"]}, 400, "estimate_required"),
    ({"kind": "dry_run"}, 400, "invalid_selection"),
    ({"kind": "explode", "thread_ids": ["x"]}, 400, "invalid_parameters"),
    ({"kind": "dry_run", "thread_ids": ["x"], "max_in_flight": 0}, 400, "invalid_parameters"),
    ({"kind": "convert", "estimate_job": 999}, 400, "estimate_job_not_found"),
    ({"kind": "dry_run", "filter": {"mode": None, "q": ""}}, 400, "invalid_selection"),
    (["not", "an", "object"], 400, "invalid_json"),
])
def test_post_errors_are_data(delta_rt, manager, body, status, code):
    response = _post(Client(), body, **_bearer(manager))
    assert response.status_code == status and response.json()["code"] == code
    assert response.json()["hint"]
    assert ConversionJob.objects.count() == 0


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe", b"null"])
def test_a_body_that_is_no_json_object_is_invalid_json(delta_rt, manager, raw):
    response = Client().post("/api/jobs", raw, content_type="application/json", headers=_bearer(manager))
    assert response.status_code == 400
    assert response.json() == {"detail": "Invalid job: the body is not a JSON object",
                               "hint": JOB_BODY_HINT, "code": "invalid_json"}
    assert ConversionJob.objects.count() == 0


def test_an_unknown_estimate_job_has_its_own_code_and_hint(delta_rt, manager):
    data = _post(Client(), {"kind": "convert", "thread_ids": ["delta-f10-1t"], "estimate_job": 999},
                 **_bearer(manager)).json()
    assert data == {"code": "estimate_job_not_found", "detail": "No job 999.",
                    "hint": "Pass the id of a finished dry run of these threads as estimate_job "
                            "(GET /api/jobs lists the jobs), or confirmed: true."}


@pytest.mark.parametrize("with_threads", [True, False])
def test_an_estimate_job_that_is_no_finished_dry_run_says_what_to_pass(finished_job, manager, with_threads):
    conversion = finished_job("convert", {"thread_ids": ["delta-f10-1t"]}, confirmed=True)
    body = {"kind": "convert", "estimate_job": conversion.pk}
    response = _post(Client(), {**body, "thread_ids": ["delta-f10-1t"]} if with_threads else body,
                     **_bearer(manager))
    assert response.status_code == 400 and response.json() == {
        "code": "invalid_selection",
        "detail": f"Job {conversion.pk} is not a finished dry_run job; it cannot estimate a convert job.",
        "hint": "Pass the id of a finished dry run of the job's kind (dry_run for convert, compact_dry_run for "
                "compact, prune_dry_run for prune) as estimate_job, or confirmed: true."}


def test_an_estimate_job_of_another_kind_names_the_dry_run_needed(finished_job, manager):
    dry = finished_job("dry_run", {"thread_ids": ["delta-f10-1t"]})
    response = _post(Client(), {"kind": "compact", "estimate_job": dry.pk}, **_bearer(manager))
    assert response.status_code == 400
    assert response.json()["detail"] == (f"Job {dry.pk} is not a finished compact_dry_run job; "
                                         "it cannot estimate a compact job.")


def test_an_empty_filter_is_no_selection(delta_rt, manager):
    data = _post(Client(), {"kind": "dry_run", "filter": {"mode": None}}, **_bearer(manager)).json()
    assert data["detail"] == "Give exactly one of thread_ids, filter (with at least one criterion) or backup_ids."
    assert not ConversionJob.objects.exists()


def test_post_above_the_size_limit_is_a_409_until_confirmed(finished_job, manager):
    dry = finished_job("dry_run", {"thread_ids": ["delta-f10-9t"]})
    body = {"kind": "convert", "estimate_job": dry.pk, "size_limit_bytes": 100}
    refused = _post(Client(), body, **_bearer(manager))
    assert refused.status_code == 409 and refused.json()["code"] == "size_limit_exceeded"
    assert _post(Client(), {**body, "confirmed": True}, **_bearer(manager)).status_code == 201


def test_staff_without_the_permission_gets_403(delta_rt, viewer):
    response = _post(Client(), {"kind": "dry_run", "thread_ids": ["delta-f10-9t"]}, **_bearer(viewer))
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert not ConversionJob.objects.exists()


def test_a_session_post_needs_the_csrf_token(delta_rt, manager):
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    refused = _post(client, {"kind": "dry_run", "thread_ids": ["delta-f10-9t"]})
    assert refused.status_code == 403 and refused.json()["code"] == "csrf_failed"

    client.get("/jobs/")
    token = client.cookies["csrftoken"].value
    accepted = _post(client, {"kind": "dry_run", "thread_ids": ["delta-f10-9t"]}, **{"X-CSRFToken": token})
    assert accepted.status_code == 201


def test_a_token_post_needs_no_csrf_token(delta_rt, manager):
    client = Client(enforce_csrf_checks=True)
    assert _post(client, {"kind": "dry_run", "thread_ids": ["delta-f10-9t"]}, **_bearer(manager)).status_code == 201


def test_a_job_over_unknown_thread_ids_is_a_400_naming_them(delta_rt, manager):
    response = _post(Client(), {"kind": "dry_run", "thread_ids": ["delta-f10-1t", "no-such-thread"]},
                     **_bearer(manager))
    body = response.json()
    assert response.status_code == 400 and body["code"] == "unknown_threads"
    assert body["detail"] == "No such thread in the checkpoint database: no-such-thread."
    assert "thread list" in body["hint"]
    assert not ConversionJob.objects.exists()


def test_a_reclaim_job_shows_its_sizes_in_the_api(delta_rt, viewer):
    from dashboard.jobs import reclaiming

    job = run_inline(reclaiming.create_reclaim_job(None, launched_by="test", runner="inline"))
    data = Client().get(f"/api/jobs/{job.pk}", headers=_bearer(viewer)).json()
    assert data["kind"] == "reclaim" and data["reclaim"]["statement"] == "VACUUM"
    assert data["reclaim"]["bytes_after"] <= data["reclaim"]["bytes_before"]
    assert [r["status"] for r in data["results"]] == ["reclaimed"]


@pytest.mark.parametrize(("field", "send", "code"), [
    ("integrity", "true or false", "invalid_parameters"),
    ("confirmed", "true or false", "invalid_parameters"),
    ("max_in_flight", "a number", "invalid_parameters"),
    ("estimate_job", "a number", "invalid_parameters"),
    ("backup", "true or false", "invalid_retention"),
    ("rule", "a string", "invalid_retention"),
    ("protect", "a list", "invalid_retention"),
])
def test_an_explicit_null_option_is_refused_naming_the_field(delta_rt, manager, field, send, code):
    """An option is given or left out: ``null`` is neither (``"integrity": null`` is not a boolean), so the 400
    names the field and what to send; nothing is created."""
    response = _post(Client(), {"kind": "dry_run", "thread_ids": ["delta-f10-9t"], field: None}, **_bearer(manager))
    assert response.status_code == 400
    assert response.json() == {
        "code": code, "hint": JOB_BODY_HINT,
        "detail": f"Invalid job: {field}: is null; send {send}, or leave {field} out for its default"}
    assert not ConversionJob.objects.exists()


def test_a_null_selection_field_is_still_not_given(delta_rt, manager):
    """The selection fields are the exception: ``null`` names the one not used (docs/api.md)."""
    response = _post(Client(), {"kind": "dry_run", "thread_ids": ["delta-f10-9t"], "filter": None,
                                "backup_ids": None}, **_bearer(manager))
    assert response.status_code == 201, response.content
    assert response.json()["selection"] == {"thread_ids": ["delta-f10-9t"]}
