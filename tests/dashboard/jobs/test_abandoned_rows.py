"""Rows whose worker died (dashboard.jobs.stalls.recover_abandoned): released so every job ends.

A SIGKILLed worker leaves its row ``running`` with its pid; on Kombu's filesystem transport no
message comes back. The sweep finds the owner gone (a dead pid on this host, or no heartbeat within
the lease from the workers of another host) and sends the row again, puts it back to pending
(paused job) or skips it (cancelling job); a second Cancel ends a job whose worker is gone.
Real worker kills on each broker: ``tests/reliability/test_worker_kill_trials.py``.
"""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import sys

import pytest
from django.utils import timezone

from dashboard.fleet.models import ProcessRecord
from dashboard.jobs import services, stalls
from dashboard.jobs.models import ConversionJob, ThreadResult
from tests.dashboard.jobs.conftest import DELTA_SMALL

pytestmark = pytest.mark.django_db


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _stranded_job(*, host: str | None = None, pid: int | None = None, started_ago_s: float = 5) -> ConversionJob:
    """A running Celery dry run whose first row a worker claimed and died on (``running``, dead pid)."""
    job = services.create_job(None, ConversionJob.Kind.DRY_RUN, {"thread_ids": DELTA_SMALL[:2]},
                              services.JobOptions(max_in_flight=1, launched_by="test"))
    services.claim_batch(job.pk)
    row = job.results.get(status=ThreadResult.QUEUED)
    ThreadResult.objects.filter(pk=row.pk).update(
        status=ThreadResult.RUNNING, attempts=1, worker_host=host or socket.gethostname(),
        worker_pid=pid or _dead_pid(), worker_node="celery@gone",
        started_at=timezone.now() - dt.timedelta(seconds=started_ago_s))
    job.refresh_from_db()
    return job


def _worker(host: str, *, started_ago_s: float, beat_ago_s: float) -> ProcessRecord:
    now = timezone.now()
    return ProcessRecord.objects.create(
        instance_id=f"w-{started_ago_s}-{beat_ago_s}", role="worker", name="worker", host=host, pid=4242,
        started_at=now - dt.timedelta(seconds=started_ago_s), last_heartbeat=now - dt.timedelta(seconds=beat_ago_s),
        mode="delta", snapshot_frequency=10, heartbeat_interval_s=15)


def test_a_running_row_whose_local_worker_is_dead_is_sent_again(delta_rt):
    job = _stranded_job()
    sent: list[int] = []
    recovery = stalls.recover_abandoned(sent.append)
    row = job.results.order_by("id").first()
    assert recovery.sent == sent == [row.pk] and recovery.jobs == {job.pk}
    assert (row.status, row.attempts) == ("queued", 1)
    # The next claim is attempt 2; the dead attempt can never record.
    assert services.run_thread(row.pk).ran
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("needs_conversion", 2)


def test_a_row_whose_worker_is_alive_is_left_alone(delta_rt):
    job = _stranded_job(pid=1)  # pid 1 always exists
    assert stalls.recover_abandoned(lambda _id: pytest.fail("sent")).jobs == set()
    assert job.results.filter(status="running").count() == 1


def test_a_remote_worker_is_gone_when_no_worker_of_its_host_older_than_the_claim_heartbeats(delta_rt):
    job = _stranded_job(host="far-host", pid=777, started_ago_s=60)
    _worker("far-host", started_ago_s=600, beat_ago_s=5)  # alive, registered before the claim: vouches
    assert stalls.recover_abandoned(lambda _id: pytest.fail("sent")).jobs == set()
    ProcessRecord.objects.update(last_heartbeat=timezone.now() - dt.timedelta(seconds=46))  # 3 beats of 15 s missed
    _worker("far-host", started_ago_s=10, beat_ago_s=1)  # restarted after the claim: does not vouch
    sent: list[int] = []
    assert stalls.recover_abandoned(sent.append).sent == sent == [job.results.order_by("id").first().pk]


def test_a_paused_jobs_abandoned_row_goes_back_to_pending_and_resume_sends_it(delta_rt, monkeypatch):
    job = _stranded_job()
    ConversionJob.objects.filter(pk=job.pk).update(state=ConversionJob.State.PAUSED)
    stalls.recover_abandoned(lambda _id: pytest.fail("a paused job sends nothing"))
    assert sorted(job.results.values_list("status", flat=True)) == ["pending", "pending"]
    monkeypatch.setattr("dashboard.jobs.services.launch", lambda j: None)
    services.resume(job)
    assert services.claim_batch(job.pk).sends  # a free slot: the row is sent


def test_a_second_cancel_ends_a_job_whose_worker_is_gone(delta_rt):
    job = _stranded_job(pid=1)
    services.cancel(job)
    assert job.state == "cancelling"  # the owner (pid 1) looks alive: it may still finish
    ThreadResult.objects.filter(job=job, status="running").update(worker_pid=_dead_pid())
    services.cancel(job)
    assert job.state == "cancelled" and job.finished_at is not None
    lost = job.results.get(error_code="worker_lost")
    assert lost.status == "skipped" and lost.hint == stalls.WORKER_LOST_HINT
    assert sorted(job.results.values_list("status", flat=True)) == ["skipped", "skipped"]


def test_the_beat_sweep_ends_a_cancelling_job_and_a_running_one_is_retryable_after(delta_rt, monkeypatch):
    from dashboard.jobs import tasks

    sent: list[int] = []
    monkeypatch.setattr(tasks, "send_again", sent.append)
    job = _stranded_job()
    ConversionJob.objects.filter(pk=job.pk).update(state=ConversionJob.State.CANCELLING)
    answer = tasks.requeue_stalled()
    job.refresh_from_db()
    assert job.state == "cancelled" and answer["ended"] == [job.results.order_by("id").first().pk] and sent == []


def test_a_thread_that_keeps_losing_its_worker_is_failed_not_run_for_ever(delta_rt):
    job = _stranded_job()
    ThreadResult.objects.filter(job=job, status="running").update(attempts=stalls.MAX_WORKER_LOSSES)
    recovery = stalls.recover_abandoned(lambda _id: pytest.fail("sent"))
    row = job.results.get(pk=recovery.ended[0])
    assert (row.status, row.error_code) == ("error", "worker_lost")


def test_a_host_whose_workers_never_registered_is_not_presumed_gone(delta_rt):
    job = _stranded_job(host="unregistered-host", pid=777, started_ago_s=3600)
    assert stalls.recover_abandoned(lambda _id: pytest.fail("sent")).jobs == set()
    assert job.results.filter(status="running").count() == 1


def test_the_command_releases_a_dead_workers_row_and_ends_a_cancelling_job(delta_rt):
    import io

    from django.core.management import call_command

    running = _stranded_job()
    cancelling = _stranded_job()
    ConversionJob.objects.filter(pk=cancelling.pk).update(state=ConversionJob.State.CANCELLING)
    out = io.StringIO()
    call_command("requeue_stalled_threads", "--older-than", "600", stdout=out)
    text = out.getvalue()
    sent = running.results.order_by("id").first()
    lost = cancelling.results.order_by("id").first()
    assert f"sent again: job {running.pk} thread {sent.thread_id} (row {sent.pk})" in text
    assert f"worker lost: job {cancelling.pk} thread {lost.thread_id} (row {lost.pk}) skipped" in text
    cancelling.refresh_from_db()
    assert cancelling.state == "cancelled"
    assert running.results.get(pk=sent.pk).status == "queued"
