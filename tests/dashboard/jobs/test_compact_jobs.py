"""Compaction as a job: ``compact_dry_run`` and ``compact`` through ``POST /api/jobs`` and the services,
revert, the full-mode fleet refusal, and a full-mode worker's refusal."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.accounts.models import ApiToken
from dashboard.fleet.models import ProcessRecord
from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import JobOptions, run_inline
from deerflow import convert
from tests.deerflow.convert.support import open_saver, raw_rows

pytestmark = pytest.mark.django_db


def _post(body, user):
    return Client().post("/api/jobs", json.dumps(body), content_type="application/json",
                         headers={"Authorization": f"Bearer {ApiToken.issue(user)[1]}"})


def _full_mode_process() -> None:
    now = timezone.now()
    ProcessRecord.objects.create(instance_id="old", role="web", name="web@old:7", host="old", pid=7, started_at=now,
                                 last_heartbeat=now, mode="full", snapshot_frequency=10)


def test_compact_from_a_dry_run_over_the_api_then_revert(delta_rt, small_db, manager):
    with open_saver(small_db):  # LangGraph's setup() migrates the fixture file first (writes.task_path)
        pass
    original = raw_rows(small_db, "full-rollback")
    response = _post({"kind": "compact_dry_run", "thread_ids": ["full-rollback", "delta-f10-9t"]}, manager)
    assert response.status_code == 201, response.content
    dry = run_inline(ConversionJob.objects.get(pk=response.json()["id"]))
    assert dry.state == "succeeded"
    assert dict(dry.results.values_list("thread_id", "status")) == {
        "full-rollback": "needs_compaction", "delta-f10-9t": "already_delta"}
    preview = dry.results.get(thread_id="full-rollback")
    assert preview.bytes_after < preview.bytes_before

    response = _post({"kind": "compact", "estimate_job": dry.pk}, manager)
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["selection"] == {"thread_ids": ["full-rollback"]} and data["estimate"]["threads"] == 1
    job = run_inline(ConversionJob.objects.get(pk=data["id"]))
    (result,) = job.results.all()
    assert job.state == "succeeded" and result.status == "compacted" and result.backup_id
    assert result.worker_mode == "delta" and result.bytes_after < result.bytes_before
    assert [b.thread_id for b in convert.list_backups(small_db)] == ["full-rollback"]

    undo = run_inline(services.revert(job, manager))
    assert undo.state == "succeeded" and raw_rows(small_db, "full-rollback") == original


def test_compact_without_an_estimate_needs_confirmation(delta_rt, manager):
    response = _post({"kind": "compact", "thread_ids": ["full-short-3t"]}, manager)
    assert response.status_code == 400 and response.json()["code"] == "estimate_required"


def test_a_live_full_mode_process_refuses_a_compact_job_unless_forced(delta_rt, manager):
    _full_mode_process()
    response = _post({"kind": "compact", "thread_ids": ["full-short-3t"], "confirmed": True}, manager)
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "full_mode_fleet" and "web@old:7" in body["detail"] and "409" in body["hint"]
    assert not ConversionJob.objects.exists()
    response = _post({"kind": "compact", "thread_ids": ["full-short-3t"], "confirmed": True,
                      "force_full_fleet": True}, manager)
    assert response.status_code == 201, response.content


def test_a_full_mode_worker_refuses_compaction_rows(runtime_for, small_db):
    runtime_for(small_db, "delta")
    job = services.create_job(None, "compact", {"thread_ids": ["full-short-3t"]},
                              JobOptions(confirmed=True, runner="inline",
                              launched_by="test"))
    runtime_for(small_db, "full")
    job = run_inline(job)
    (result,) = job.results.all()
    assert result.status == "refused" and result.hint
    assert convert.list_backups(small_db) == []
