"""A job no live worker can run says so and why on its page, from the fleet registry's worker heartbeats: no
worker at all, or only workers that do not consume ``checkpoints.delta`` (its worker died after the launch;
a launch without one is refused, tests/dashboard/jobs/test_launch_admission.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.fleet.models import ProcessRecord
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.workers import registry_check
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db


@pytest.fixture
def live_maintenance_worker() -> None:
    """No worker registered unless a test makes one."""
    return None


def _worker(name: str, mode: str, queues: list[str], silent_for: dt.timedelta = dt.timedelta(0)) -> None:
    now = timezone.now()
    ProcessRecord.objects.create(instance_id=name, role="worker", name=name, host="h", pid=len(name),
                                 started_at=now - dt.timedelta(hours=2), last_heartbeat=now - silent_for,
                                 mode=mode, snapshot_frequency=10, queues=queues)


def _job(kind: str = "compact", state: str = "running", runner: str = "celery") -> ConversionJob:
    return ConversionJob.objects.create(kind=kind, state=state, runner=runner, selection={"thread_ids": ["t"]})


def _notice(client, job: ConversionJob, **headers) -> str | None:
    url = f"/jobs/{job.pk}/progress" if headers else f"/jobs/{job.pk}/"
    found = parse(client.get(url, **headers).content).find_all("div", id="job-unrunnable")
    return found[0].text if found else None


def test_no_worker_heartbeat_at_all(delta_rt, staff_client):
    job = _job()
    text = _notice(staff_client, job)
    assert "No live worker can run this job." in text
    assert "No Celery worker has sent a heartbeat in the last three intervals" in text
    assert "celery -A dashboard worker -Q dashboard" in text  # how to start one
    assert "whatever mode it names" in text  # not "a delta-mode config.yaml": workers always freeze delta
    page = parse(staff_client.get(f"/jobs/{job.pk}/").content)
    assert page.find("span", id="job-waiting").text == "waiting: no live worker can run it"
    assert "No Celery worker" in _notice(staff_client, job, HTTP_HX_REQUEST="true")  # the polled fragment too


def test_only_full_mode_workers_are_alive(delta_rt, staff_client):
    _worker("celery@full1", "full", ["dashboard", "checkpoints.full"])
    _worker("celery@delta-dead", "delta", ["dashboard", "checkpoints.delta"], silent_for=dt.timedelta(minutes=5))
    text = _notice(staff_client, _job("compact"))
    assert "The only live workers, celery@full1 (full mode), do not consume checkpoints.delta" in text
    assert "Restart them." in text
    assert "celery@delta-dead" not in text  # stale: not alive


def test_a_live_delta_worker_runs_it(delta_rt, staff_client):
    _worker("celery@full1", "full", ["dashboard", "checkpoints.full"])
    _worker("celery@delta1", "delta", ["dashboard", "checkpoints.delta"])
    assert _notice(staff_client, _job()) is None
    check = registry_check()
    assert (check.state, check.workers, check.others) == ("ok", ["celery@delta1"], ["celery@full1 (full mode)"])


@pytest.mark.parametrize("state, runner", [("paused", "celery"), ("succeeded", "celery"), ("running", "inline")])
def test_jobs_that_wait_for_no_worker(delta_rt, staff_client, state, runner):
    assert _notice(staff_client, _job("dry_run", state, runner)) is None
