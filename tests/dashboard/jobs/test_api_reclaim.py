"""``POST /api/jobs`` with ``"kind": "reclaim"``: the page's confirmation field, no thread selection, no thread row."""

from __future__ import annotations

import json

import pytest

from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import run_inline
from deerflow.convert.reclaim import database_sizes

pytestmark = pytest.mark.django_db


def _post(client, body):
    return client.post("/api/jobs", json.dumps(body), content_type="application/json")


def _fields(response) -> str:
    return response.json()["detail"]


@pytest.mark.parametrize("body, field", [
    ({"kind": "reclaim"}, "confirm"),
    ({"kind": "reclaim", "confirm": False}, "confirm"),
    ({"kind": "reclaim", "confirm": "yes"}, "confirm"),
    ({"kind": "reclaim", "confirm": True, "thread_ids": ["delta-f10-1t"]}, "thread_ids"),
    ({"kind": "reclaim", "confirm": True, "filter": {"mode": "delta"}}, "filter"),
    ({"kind": "reclaim", "confirm": True, "backup_ids": ["b"]}, "backup_ids"),
    ({"kind": "reclaim", "confirm": True, "estimate_job": 1}, "estimate_job"),
    ({"kind": "reclaim", "confirm": True, "throttle_delay_s": 1}, "throttle_delay_s"),
    ({"kind": "dry_run", "thread_ids": ["delta-f10-1t"], "confirm": True}, "confirm"),
    ({"kind": "dry_run", "thread_ids": ["delta-f10-1t"], "full": True}, "full"),
])
def test_a_reclaim_body_needs_confirm_and_selects_no_thread(delta_rt, manager_client, body, field):
    response = _post(manager_client, body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_parameters" and field in _fields(response)
    assert not ConversionJob.objects.exists()  # nothing was created


def test_a_confirmed_reclaim_vacuums_the_database_and_records_no_thread(delta_rt, small_db, manager_client):
    response = _post(manager_client, {"kind": "reclaim", "confirm": True})
    assert response.status_code == 201, response.content
    answer = response.json()
    assert (answer["kind"], answer["selection"], answer["reclaim"]) == ("reclaim", {"database": "sqlite"},
                                                                         {"full": False})
    job = run_inline(ConversionJob.objects.get(pk=answer["id"]))
    assert job.state == "succeeded"
    assert list(job.results.values_list("thread_id", "status")) == [("", "reclaimed")]  # the database's row only
    assert job.reclaim["statement"] == "VACUUM" and job.reclaim["bytes_after"] == sum(database_sizes(small_db).values())


def test_a_reclaim_follows_its_source_job_and_refuses_vacuum_full_on_sqlite(delta_rt, manager_client):
    unknown = _post(manager_client, {"kind": "reclaim", "confirm": True, "source_job": 999})
    assert unknown.status_code == 404 and unknown.json()["code"] == "source_job_not_found"
    full = _post(manager_client, {"kind": "reclaim", "confirm": True, "full": True})
    assert full.status_code == 400 and "VACUUM FULL is for Postgres" in full.json()["detail"]
    assert not ConversionJob.objects.exists()


def test_a_reclaim_needs_the_conversions_permission(delta_rt, viewer_client):
    response = _post(viewer_client, {"kind": "reclaim", "confirm": True})
    assert response.status_code == 403 and "jobs.manage_conversions" in response.json()["hint"]
