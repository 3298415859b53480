"""Bounded job requests: selections, ids, body size and depth, strict booleans, paged results.

Each refusal is a 400 with its own code and a hint, and creates no job.
Personas: ``manager`` (staff with ``jobs.manage_conversions``, bearer token), ``viewer``.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from dashboard.accounts.models import ApiToken
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.selection import MAX_ID_LENGTH, MAX_SELECTED_IDS
from dashboard.jobs.services import JobOptions
from dashboard.jsonbody import MAX_DEPTH
from tests.dashboard.jobs.conftest import DELTA_SMALL

pytestmark = pytest.mark.django_db


def _bearer(user) -> dict:
    return {"Authorization": f"Bearer {ApiToken.issue(user)[1]}"}


def _post(body, user, raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(body)
    return Client().post("/api/jobs", data, content_type="application/json", headers=_bearer(user))


def _refused(response, code: str) -> dict:
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["code"] == code and body["hint"], body
    assert ConversionJob.objects.count() == 0
    return body


def test_the_bounds(settings):
    assert (MAX_SELECTED_IDS, MAX_ID_LENGTH, MAX_DEPTH) == (1000, 1024, 8)
    assert settings.DASHBOARD_MAX_JSON_BODY_BYTES == 256 * 1024


def test_more_ids_than_the_bound_go_through_a_filter(delta_rt, manager):
    ids = [f"t-{n}" for n in range(MAX_SELECTED_IDS + 1)]
    body = _refused(_post({"kind": "dry_run", "thread_ids": ids}, manager), "selection_too_large")
    assert body["detail"] == "thread_ids lists 1,001 ids; a request may list at most 1,000."
    assert "filter" in body["hint"]


def test_the_bound_itself_is_accepted(delta_rt, manager):
    ids = DELTA_SMALL + [f"t-{n}" for n in range(MAX_SELECTED_IDS - len(DELTA_SMALL))]
    response = _post({"kind": "dry_run", "thread_ids": ids}, manager)
    # Past the bound check: the ids are looked up (two chunks of 500) and the made-up ones named, not too many.
    body = _refused(response, "unknown_threads")
    assert body["detail"].startswith("No such threads in the checkpoint database: t-0, t-1, ")
    assert body["detail"].endswith(f"t-19 … ({MAX_SELECTED_IDS - len(DELTA_SMALL) - 20} more).")
    response = _post({"kind": "dry_run", "thread_ids": DELTA_SMALL}, manager)
    assert response.status_code == 201 and ConversionJob.objects.get().results.count() == len(DELTA_SMALL)


def test_an_id_longer_than_any_real_one_is_refused(delta_rt, manager):
    body = _refused(_post({"kind": "dry_run", "thread_ids": ["a" * 100_000]}, manager), "id_too_long")
    assert body["detail"].startswith("thread_ids has an id of 100,000 characters")
    assert len(body["detail"]) < 200  # the id is not echoed back whole


def test_backup_ids_are_bounded_too(delta_rt, manager):
    _refused(_post({"kind": "revert", "backup_ids": ["b" * (MAX_ID_LENGTH + 1)]}, manager), "id_too_long")


def test_a_body_above_the_size_bound_is_refused_before_parsing(delta_rt, manager):
    raw = b'{"kind": "dry_run", "thread_ids": ["' + b"x" * (256 * 1024) + b'"]}'
    body = _refused(_post(None, manager, raw=raw), "body_too_large")
    assert body["detail"] == "The body is larger than 262,144 bytes."


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_a_body_nested_too_deep_is_refused(delta_rt, manager, depth):
    raw = ('{"kind": "dry_run", "filter": ' + "[" * depth + "]" * depth + "}").encode()
    body = _refused(_post(None, manager, raw=raw), "json_too_deep")
    assert body["detail"] == "The body nests deeper than 8 levels."


@pytest.mark.parametrize(("field", "value"), [("integrity", "maybe"), ("integrity", 1), ("confirmed", "yes"),
                                              ("confirmed", "false")])
def test_booleans_are_strict(delta_rt, manager, field, value):
    body = _refused(_post({"kind": "dry_run", "thread_ids": ["delta-f10-1t"], field: value}, manager),
                    "invalid_parameters")
    assert f"{field}: must be true or false (a JSON boolean), not {value!r}" in body["detail"]


@pytest.mark.parametrize(("value", "stored"), [(False, False), (True, True), (..., True)])
def test_real_booleans_are_taken(delta_rt, manager, value, stored):
    """``...``: the field left out (its default); ``null`` is refused (tests/dashboard/jobs/test_api.py)."""
    option = {} if value is ... else {"integrity": value}
    response = _post({"kind": "dry_run", "thread_ids": ["delta-f10-1t"], **option}, manager)
    assert response.status_code == 201
    assert ConversionJob.objects.get().integrity is stored


def test_the_launch_form_bounds_thread_ids(delta_rt, manager_client):
    response = manager_client.post("/jobs/launch", {"thread_id": ["y" * (MAX_ID_LENGTH + 1)]})
    assert response.status_code == 400
    assert "ids have at most 1,024" in response.content.decode()
    assert ConversionJob.objects.count() == 0


def test_job_results_are_paged(finished_job, viewer):
    job = finished_job("dry_run", {"thread_ids": DELTA_SMALL})
    headers = _bearer(viewer)
    first = Client().get(f"/api/jobs/{job.pk}?results_limit=2", headers=headers).json()
    assert [r["thread_id"] for r in first["results"]] == DELTA_SMALL[:2]
    assert (first["results_total"], first["results_next_offset"]) == (len(DELTA_SMALL), 2)
    seen, offset = [], 0
    while offset is not None:
        page = Client().get(f"/api/jobs/{job.pk}?results_limit=2&results_offset={offset}", headers=headers).json()
        seen += [r["thread_id"] for r in page["results"]]
        offset = page["results_next_offset"]
    assert seen == DELTA_SMALL
    whole = Client().get(f"/api/jobs/{job.pk}", headers=headers).json()
    assert len(whole["results"]) == len(DELTA_SMALL) and whole["results_next_offset"] is None


@pytest.mark.parametrize("query", ["results_limit=0", "results_limit=1001", "results_offset=-1",
                                   "results_limit=lots"])
def test_bad_result_pages_are_400(finished_job, viewer, query):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-1t"]})
    response = Client().get(f"/api/jobs/{job.pk}?{query}", headers=_bearer(viewer))
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_parameters" and "results_limit <= 1000" in response.json()["hint"]


@pytest.mark.parametrize(("value", "stored"), [(True, True), (False, False), (..., False)])
def test_the_branch_ambiguity_acknowledgement_is_recorded_on_the_job(delta_rt, manager, value, stored):
    option = {} if value is ... else {"acknowledge_branch_ambiguous": value}
    response = _post({"kind": "dry_run", "thread_ids": ["delta-f10-1t"], **option}, manager)
    assert response.status_code == 201
    job = ConversionJob.objects.get()
    assert job.acknowledge_branch_ambiguous is stored
    assert response.json()["acknowledge_branch_ambiguous"] is stored


def test_the_branch_ambiguity_acknowledgement_is_strict(delta_rt, manager):
    body = _refused(_post({"kind": "dry_run", "thread_ids": ["delta-f10-1t"], "acknowledge_branch_ambiguous": "yes"},
                          manager), "invalid_parameters")
    assert "acknowledge_branch_ambiguous: must be true or false" in body["detail"]


def test_the_launch_form_records_the_acknowledgement_and_the_conversion_keeps_it(delta_rt, manager_client, manager):
    from dashboard.jobs import services

    response = manager_client.post("/jobs/launch", {"thread_id": ["delta-f10-1t"],
                                                    "acknowledge_branch_ambiguous": "on"})
    assert response.status_code == 302
    dry = ConversionJob.objects.get(kind="dry_run")
    assert dry.acknowledge_branch_ambiguous is True
    assert "ambiguous branches" in manager_client.get(f"/jobs/{dry.pk}/").content.decode()
    plain = manager_client.post("/jobs/launch", {"thread_id": ["delta-f10-1t"]})
    assert plain.status_code == 302 and ConversionJob.objects.latest("pk").acknowledge_branch_ambiguous is False
    dry.state = ConversionJob.State.SUCCEEDED
    dry.save()
    dry.results.update(status="needs_conversion")
    convert = services.create_job(manager, ConversionJob.Kind.CONVERT, None, JobOptions(source_job=dry))
    assert convert.acknowledge_branch_ambiguous is True
