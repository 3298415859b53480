"""Filter selections are resolved in the worker, not in the request (dashboard.jobs.resolving).

A seeded SQLite database of 2,500 delta threads (three pages of the
inventory's 1,000) stands in for a large one: the request that launches a job
over "every delta thread" writes no result row and answers ``resolving``;
the dispatch task then writes one row per thread, exactly once even when it
is delivered twice; a job cancelled while resolving is never resolved.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from django.test import Client

from dashboard.errors.jobs import NothingToConvert
from dashboard.jobs import resolving, services, tasks
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.services import JobOptions
from deerflow.config.database_config import DatabaseConfig
from deerflow.seed import SeedPlan, seed_threads

pytestmark = pytest.mark.django_db

THREADS = 2500


@pytest.fixture(scope="module")
def seeded_db(tmp_path_factory) -> DatabaseConfig:
    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path_factory.mktemp("filter-resolution")))
    seed_threads(database, SeedPlan(threads=THREADS, turns_min=1, turns_max=1, mode="delta", snapshot_frequency=3,
                                    seed="filter-resolution", templates=4))
    return database


@pytest.fixture
def seeded_rt(runtime_for, seeded_db):
    return runtime_for(seeded_db, "delta")


def _thread_ids(database: DatabaseConfig) -> set[str]:
    with sqlite3.connect(Path(database.sqlite_dir) / "deerflow.db") as conn:
        return {r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}


def test_the_request_writes_no_row_and_answers_resolving(seeded_rt, manager):
    from tests.dashboard.jobs.test_api import _bearer, _post

    response = _post(Client(), {"kind": "dry_run", "filter": {"mode": "delta"}}, **_bearer(manager))
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["state"], body["selection"]) == ("resolving", {"filter": {
        "mode": "delta", "thread_class": None, "q": None, "updated_before": None, "updated_after": None}})
    assert ThreadResult.objects.filter(job_id=body["id"]).count() == 0
    page = Client().get(f"/api/jobs/{body['id']}", headers=_bearer(manager)).json()
    assert (page["state"], page["results"], page["results_total"]) == ("resolving", [], 0)


def test_the_dispatch_task_resolves_every_matching_thread_once(seeded_rt, seeded_db):
    job = services.create_job(None, "dry_run", {"filter": {"mode": "delta"}},
                              JobOptions(max_in_flight=3, launched_by="t"))
    assert (job.state, job.results.count()) == ("resolving", 0)

    answer = tasks.dispatch(job.pk)  # as the worker runs it: resolve, then send the first threads
    job.refresh_from_db()
    assert answer == {"job_id": job.pk, "state": "running", "sent": 3} and job.state == "running"
    ids = list(job.results.values_list("thread_id", flat=True))
    assert len(ids) == THREADS and set(ids) == _thread_ids(seeded_db)

    assert resolving.resolve(job.pk) is None  # a second delivery of the dispatch writes nothing
    assert job.results.count() == THREADS


def test_a_job_cancelled_while_resolving_is_never_resolved(seeded_rt):
    job = services.create_job(None, "dry_run", {"filter": {"q": "a"}}, JobOptions(launched_by="t"))
    services.cancel(job)
    assert resolving.resolve(job.pk) is None
    assert services.claim_batch(job.pk).state == "cancelled"
    assert job.results.count() == 0


def test_a_filter_that_surely_matches_nothing_is_refused_in_the_request(seeded_rt):
    with pytest.raises(NothingToConvert) as err:
        services.create_job(None, "dry_run", {"filter": {"q": "no-such-thread-anywhere"}}, JobOptions(launched_by="t"))
    assert str(err.value).startswith("No delta thread matches this filter")
    assert not ConversionJob.objects.exists()


def test_a_filter_matching_nothing_beyond_the_first_page_finishes_the_job_without_threads(seeded_rt):
    # Every seeded thread is younger than 2000-01-01's opposite: nothing matches, but only after paging all
    # three pages, which the request does not do; the worker finds nothing and the job succeeds with none.
    job = services.create_job(None, "dry_run", {"filter": {"updated_before": "2000-01-01T00:00:00"}},
                              JobOptions(launched_by="t"))
    assert job.state == "resolving"
    assert resolving.resolve(job.pk) == 0
    assert services.claim_batch(job.pk).state == "succeeded"


def test_the_command_and_a_conversion_from_a_dry_run_resolve_in_their_own_process(seeded_rt):
    inline = services.create_job(None, "dry_run", {"filter": {"q": "a"}},
                                 JobOptions(runner="inline", launched_by="cli:t"))
    assert inline.state == "queued" and inline.results.count() > 0
    assert resolving.needs_worker({"filter": {}}, runner="celery", source_job=inline) is False
    assert resolving.needs_worker({"thread_ids": ["x"]}, runner="celery", source_job=None) is False


def test_the_job_answer_is_json_with_the_resolving_state_word(seeded_rt, staff_client):
    job = services.create_job(None, "dry_run", {"filter": {"mode": "delta"}}, JobOptions(launched_by="t"))
    page = staff_client.get(f"/jobs/{job.pk}/")
    assert page.status_code == 200
    assert "resolving its filter" in page.content.decode()
    assert json.loads(json.dumps(job.selection)) == job.selection
