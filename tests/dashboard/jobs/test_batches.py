"""Jobs in batches sized by bytes (dashboard.jobs.batches): what one task carries, and that every per-thread
guarantee holds inside a batch (claims, pause and cancel between threads, failures, a dead worker's rows).

Real workers run batches in ``tests/reliability/test_worker_kill_trials.py`` (killed mid-batch on every broker)
and ``benchmarks/bench_jobs.py`` (the demo's filesystem broker).
"""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys

import pytest
from celery.exceptions import TimeLimitExceeded
from django.test import override_settings

from dashboard.errors.jobs import TransientDatabaseError
from dashboard.jobs import services, stalls
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.services import JobOptions
from deerflow import inventory
from deerflow.inventory import summary
from tests.dashboard.jobs.conftest import DELTA_SMALL

pytestmark = pytest.mark.django_db


@pytest.fixture
def sized(delta_rt) -> dict[str, int]:
    """The delta runtime with the thread summary built: the sizes batches are cut by."""
    summary.refresh(delta_rt.saver, full=True)
    sizes = inventory.stored_bytes(delta_rt.saver, DELTA_SMALL)
    assert set(sizes) == set(DELTA_SMALL) and all(n > 0 for n in sizes.values())
    return sizes


def _job(threads: list[str], **options) -> ConversionJob:
    return services.create_job(None, ConversionJob.Kind.DRY_RUN, {"thread_ids": threads},
                               JobOptions(launched_by="test", **options))


def _threads(job: ConversionJob, ids: tuple[int, ...]) -> list[str]:
    by_id = dict(job.results.values_list("pk", "thread_id"))
    return [by_id[i] for i in ids]


def test_small_threads_of_a_job_go_in_one_task(sized):
    job = _job(DELTA_SMALL)
    batch = services.claim_batch(job.pk)
    (send,) = batch.sends
    assert send.countdown == 0 and _threads(job, send.result_ids) == sorted(DELTA_SMALL, key=DELTA_SMALL.index)
    assert set(job.results.values_list("status", "batch")) == {("queued", send.result_ids[0])}
    assert services.claim_batch(job.pk).sends == []  # the one slot is taken by the batch, whatever it holds


def test_the_pending_rows_are_spread_over_the_free_slots(sized):
    job = _job(DELTA_SMALL[:4], max_in_flight=2)
    sends = services.claim_batch(job.pk).sends
    assert [len(s.result_ids) for s in sends] == [2, 2]
    assert [_threads(job, s.result_ids) for s in sends] == [DELTA_SMALL[:2], DELTA_SMALL[2:4]]


def test_a_batch_holds_no_more_bytes_than_the_budget(sized):
    threads = DELTA_SMALL[:4]
    budget = sized[threads[0]] + sized[threads[1]]  # the first two fit exactly; the third would pass it
    with override_settings(DASHBOARD_BATCH_BYTES=budget):
        job = _job(threads)
        (send,) = services.claim_batch(job.pk).sends
    assert _threads(job, send.result_ids) == threads[:2]


def test_a_batch_holds_no_more_threads_than_the_cap(sized):
    with override_settings(DASHBOARD_BATCH_THREADS=3):
        job = _job(DELTA_SMALL)
        (send,) = services.claim_batch(job.pk).sends
    assert _threads(job, send.result_ids) == DELTA_SMALL[:3]


def test_a_thread_the_summary_does_not_know_goes_alone(sized, delta_rt):
    from deerflow.storage.sqlread import reader_for

    with reader_for(delta_rt.saver).transaction() as tx:
        tx.execute("DELETE FROM dfa_thread_summary WHERE thread_id = ?", [DELTA_SMALL[1]])
    job = _job(DELTA_SMALL[:3], max_in_flight=3)
    sends = services.claim_batch(job.pk).sends
    assert [_threads(job, s.result_ids) for s in sends] == [[DELTA_SMALL[0]], [DELTA_SMALL[1]], [DELTA_SMALL[2]]]


def test_a_throttled_job_sends_one_thread_per_task_after_its_delay(sized):
    job = _job(DELTA_SMALL[:3], max_in_flight=2, throttle_delay_s=1.5)
    sends = services.claim_batch(job.pk).sends
    assert [(len(s.result_ids), s.countdown) for s in sends] == [(1, 0.0), (1, 1.5)]


def test_a_batch_runs_every_thread_and_records_each_on_its_row(sized):
    job = _job(DELTA_SMALL[:3])
    (send,) = services.claim_batch(job.pk).sends
    runs = services.run_threads(list(send.result_ids), worker_node="batch@test")
    assert [r.ran for r in runs] == [True, True, True]
    rows = list(job.results.order_by("id").values("status", "attempts", "worker_node", "checkpoints_total"))
    assert [(r["status"], r["attempts"], r["worker_node"]) for r in rows] == [("needs_conversion", 1, "batch@test")] * 3
    assert all(r["checkpoints_total"] > 0 for r in rows)
    assert services.claim_batch(job.pk).state == "succeeded"


def test_pause_takes_effect_between_the_threads_of_a_batch(sized, monkeypatch):
    job = _job(DELTA_SMALL[:3])
    (send,) = services.claim_batch(job.pk).sends
    first, *rest = send.result_ids
    assert services.run_thread(first).ran
    services.pause(job)
    assert [r.ran for r in services.run_threads(rest)] == [False, False]  # the same task reaches them paused
    assert list(job.results.order_by("id").values_list("status", flat=True)) == ["needs_conversion", "pending",
                                                                                  "pending"]
    monkeypatch.setattr("dashboard.jobs.services.launch", lambda j: None)
    services.resume(job)
    (again,) = services.claim_batch(job.pk).sends
    assert again.result_ids == tuple(rest)


def test_cancel_takes_effect_between_the_threads_of_a_batch(sized):
    job = _job(DELTA_SMALL[:3])
    (send,) = services.claim_batch(job.pk).sends
    assert services.run_thread(send.result_ids[0]).ran
    assert services.cancel(job).state == "cancelled"
    assert [r.ran for r in services.run_threads(list(send.result_ids[1:]))] == [False, False]
    assert list(job.results.order_by("id").values_list("status", flat=True)) == ["needs_conversion", "skipped",
                                                                                  "skipped"]


def test_a_row_deleted_under_a_batch_is_passed_over(sized):
    job = _job(DELTA_SMALL[:2])
    (send,) = services.claim_batch(job.pk).sends
    ThreadResult.objects.filter(pk=send.result_ids[0]).delete()
    runs = services.run_threads(list(send.result_ids))
    assert [(r.result.pk, r.ran) for r in runs] == [(send.result_ids[1], True)]


def test_a_time_limit_is_recorded_on_the_running_row_and_the_unreached_rows_go_back(sized):
    job = _job(DELTA_SMALL[:3])
    (send,) = services.claim_batch(job.pk).sends
    first, struck, last = send.result_ids
    assert services.run_thread(first).ran
    ThreadResult.objects.filter(pk=struck).update(status="running", attempts=1)

    assert services.record_batch_failure(list(send.result_ids), TimeLimitExceeded(1)) == job.pk
    rows = {r.pk: r for r in job.results.all()}
    assert (rows[first].status, rows[struck].status, rows[struck].error_code) == ("needs_conversion", "error",
                                                                                 "time_limit")
    assert (rows[last].status, rows[last].batch) == ("pending", None)
    (again,) = services.claim_batch(job.pk).sends
    assert again.result_ids == (last,)


def test_a_time_limit_between_two_rows_blames_neither(sized):
    job = _job(DELTA_SMALL[:2])
    (send,) = services.claim_batch(job.pk).sends
    assert services.run_thread(send.result_ids[0]).ran
    services.record_batch_failure(list(send.result_ids), TimeLimitExceeded(1))
    assert list(job.results.order_by("id").values_list("status", flat=True)) == ["needs_conversion", "pending"]


def test_a_database_error_after_the_retries_fails_the_row_it_struck_only(sized, monkeypatch):
    from deerflow import convert

    job = _job(DELTA_SMALL[:3])
    (send,) = services.claim_batch(job.pk).sends
    assert services.run_thread(send.result_ids[0]).ran

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(convert, "dry_run_thread", locked)
    with pytest.raises(TransientDatabaseError):
        services.run_threads(list(send.result_ids[1:]))
    assert services.record_batch_failure(list(send.result_ids), TransientDatabaseError("locked")) == job.pk
    statuses = list(job.results.order_by("id").values_list("status", "error_code"))
    assert statuses == [("needs_conversion", ""), ("error", "task_failed"), ("pending", "")]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_dead_workers_unreached_rows_are_sent_again_with_its_row(sized):
    job = _job(DELTA_SMALL[:3])
    (send,) = services.claim_batch(job.pk).sends
    ConversionJob.objects.filter(pk=job.pk).update(runner="celery")
    first, struck, last = send.result_ids
    assert services.run_thread(first).ran
    ThreadResult.objects.filter(pk=struck).update(status="running", attempts=1, worker_host=socket.gethostname(),
                                                  worker_pid=_dead_pid())
    sent: list[int] = []
    recovery = stalls.recover_abandoned(sent.append)
    assert sent == recovery.sent == [struck, last] and recovery.jobs == {job.pk}
    assert list(job.results.order_by("id").values_list("status", flat=True)) == ["needs_conversion", "queued",
                                                                                  "queued"]
