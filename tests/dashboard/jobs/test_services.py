"""dashboard.jobs.services on a private SQLite copy of the real fixture: the code every runner shares."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from dashboard.errors.jobs import (
    WORKER_FULL_MODE_HINT,
    EstimateRequired,
    InvalidSelection,
    InvalidTransition,
    NothingToConvert,
    SizeLimitExceeded,
    TransientDatabaseError,
)
from dashboard.jobs import resolving, services
from dashboard.jobs.kinds import Outcome
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.progress import progress
from dashboard.jobs.running import record_outcome
from dashboard.jobs.services import JobOptions
from deerflow import convert
from deerflow.errors import MISMATCH_MESSAGE
from tests import fixtures_real
from tests.dashboard.jobs.conftest import DELTA_SMALL

pytestmark = pytest.mark.django_db

THREE = ["delta-f10-9t", "delta-f10-10t", "delta-f10-fork"]


def _statuses(job: ConversionJob) -> dict[str, str]:
    return dict(job.results.values_list("thread_id", "status"))


def test_it_creates_pending_results_for_explicit_ids(delta_rt, manager):
    job = services.create_job(manager, "dry_run", {"thread_ids": ["delta-f10-9t", "delta-f10-9t", "nope"]})

    assert job.state == "queued" and job.kind == "dry_run" and job.launched_by == "manager"
    assert job.selection == {"thread_ids": ["delta-f10-9t", "nope"]}
    assert _statuses(job) == {"delta-f10-9t": "pending", "nope": "pending"}


def _resolved(job: ConversionJob) -> ConversionJob:
    """A filter job as its dispatch task leaves it: created ``resolving`` without rows, then resolved."""
    assert (job.state, job.results.count()) == ("resolving", 0)
    assert resolving.resolve(job.pk) == job.results.count()
    job.refresh_from_db()
    assert job.state == "queued"
    return job


def test_it_resolves_a_filter_through_the_inventory(delta_rt):
    job = _resolved(services.create_job(None, "dry_run", {"filter": {"thread_class": "migrated"}}))
    assert list(_statuses(job)) == ["migrated-full20-delta20"]

    everything_delta = _resolved(services.create_job(None, "dry_run", {"filter": {"mode": "delta"}}))
    assert sorted(_statuses(everything_delta)) == sorted(DELTA_SMALL)


def test_a_filter_without_mode_means_delta_and_dates_bound_it(delta_rt):
    job = _resolved(services.create_job(None, "dry_run", {"filter": {"q": "f10"}}))
    assert sorted(_statuses(job)) == sorted(t for t in DELTA_SMALL if "f10" in t)

    with pytest.raises(NothingToConvert):
        services.create_job(None, "dry_run", {"filter": {"updated_before": "2000-01-01T00:00:00"}})
    later = _resolved(services.create_job(None, "dry_run", {"filter": {"updated_after": "2000-01-01"}}))
    assert sorted(_statuses(later)) == sorted(DELTA_SMALL)


def test_the_command_resolves_a_filter_in_its_own_process(delta_rt):
    job = services.create_job(None, "dry_run", {"filter": {"q": "f10"}},
                              JobOptions(runner="inline", launched_by="cli:t"))
    assert job.state == "queued" and sorted(_statuses(job)) == sorted(t for t in DELTA_SMALL if "f10" in t)


@pytest.mark.parametrize("selection", [{}, {"thread_ids": []}, {"thread_ids": "x"}, {"backup_ids": ["b"]},
                                       {"filter": {"mode": "weird"}}, {"filter": {"colour": "red"}},
                                       {"thread_ids": ["a"], "filter": {"mode": "delta"}}])
def test_it_rejects_bad_selections(delta_rt, selection):
    with pytest.raises(InvalidSelection):
        services.create_job(None, "dry_run", selection)


def test_a_dry_run_reports_estimates_and_integrity(finished_job):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-9t", "full-short-3t", "nope"]})

    assert job.state == "partially_failed"
    rows = {r.thread_id: r for r in job.results.all()}
    assert rows["delta-f10-9t"].status == "needs_conversion"
    assert rows["delta-f10-9t"].checkpoints_rewritten == 27
    assert rows["delta-f10-9t"].bytes_after > rows["delta-f10-9t"].bytes_before > 0
    assert rows["full-short-3t"].status == "already_full"
    assert rows["nope"].status == "not_found" and rows["nope"].hint
    assert all(r.worker_mode == "delta" and r.worker_snapshot_frequency == 10 for r in rows.values())
    assert all(r.worker_host == socket.gethostname() and r.worker_pid for r in rows.values())
    p = progress(job)
    assert (p.total, p.done, p.succeeded, p.failed, p.percent, p.eta_s) == (3, 3, 2, 1, 100.0, None)


def test_a_conversion_needs_an_estimate_or_a_confirmation(delta_rt):
    with pytest.raises(EstimateRequired):
        services.create_job(None, "convert", {"thread_ids": THREE})
    assert services.create_job(None, "convert", {"thread_ids": THREE}, JobOptions(confirmed=True)).estimate == {}


def test_a_conversion_from_a_dry_run_takes_its_convertible_threads_and_totals(finished_job):
    dry = finished_job("dry_run", {"thread_ids": [*THREE, "full-short-3t", "nope"]})
    job = services.create_job(None, "convert", None, JobOptions(source_job=dry))

    assert job.selection == {"thread_ids": THREE}
    rows = dry.results.filter(thread_id__in=THREE)
    assert job.estimate == {"source_job": dry.pk, "threads": 3,
                            "checkpoints_to_rewrite": sum(r.checkpoints_rewritten for r in rows),
                            "bytes_before": sum(r.bytes_before for r in rows),
                            "bytes_after": sum(r.bytes_after for r in rows)}


def test_the_size_limit_refuses_unless_confirmed(finished_job):
    dry = finished_job("dry_run", {"thread_ids": THREE})
    with pytest.raises(SizeLimitExceeded) as caught:
        services.create_job(None, "convert", None, JobOptions(source_job=dry, size_limit_bytes=1000))
    assert caught.value.status == 409 and "size limit of 1,000 bytes" in caught.value.detail
    job = services.create_job(None, "convert", None, JobOptions(source_job=dry, size_limit_bytes=1000, confirmed=True))
    assert job.confirmed and job.size_limit_bytes == 1000


def test_a_conversion_converts_and_a_full_mode_reader_sees_the_manifest(finished_job, runtime_for, small_db):
    dry = finished_job("dry_run", {"thread_ids": THREE})
    job = services.run_inline(services.create_job(None, "convert", None, JobOptions(source_job=dry)))

    assert job.state == "succeeded", _statuses(job)
    for r in job.results.all():
        assert r.status == "converted" and r.backup_id and r.attempts == 1
        assert r.head_messages_sha256 == _manifest_head(r.thread_id)
    from dashboard.threads import services as thread_services
    from deerflow.convert.digest import messages_sha256

    full = runtime_for(small_db, "full")
    for thread_id in THREE:
        view = thread_services.read_state(full, thread_id)
        assert messages_sha256(view.values["messages"]) == _manifest_head(thread_id)


def _manifest_head(thread_id: str) -> str:
    return fixtures_real.manifest_threads()[thread_id]["backends"]["sqlite"]["head"]["messages_sha256"]


def test_a_full_mode_process_records_the_409_text_and_hint(runtime_for, small_db):
    runtime_for(small_db, "full")
    job = services.run_inline(services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-9t", "full-short-3t"]}))

    rows = {r.thread_id: r for r in job.results.all()}
    refused = rows["delta-f10-9t"]
    assert refused.status == "refused" and refused.error_code == "checkpoint_mode_mismatch"
    assert refused.error == f"Thread delta-f10-9t: {MISMATCH_MESSAGE}"
    assert refused.hint == WORKER_FULL_MODE_HINT and "checkpoints.delta" in refused.hint
    assert refused.worker_mode == "full"
    assert "Traceback" not in refused.error + refused.hint
    assert rows["full-short-3t"].status == "already_full"
    assert job.state == "partially_failed"


def test_a_full_mode_process_refuses_every_revert(finished_job, runtime_for, small_db):
    convert_job = finished_job("convert", {"thread_ids": ["delta-f10-9t"]}, confirmed=True)
    runtime_for(small_db, "full")
    job = services.run_inline(services.revert(convert_job, None))
    assert _statuses(job) == {"delta-f10-9t": "refused"}


def test_pause_takes_effect_between_threads_and_resume_continues(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    services.run_inline(job, on_result=lambda r: services.pause(r.job))

    job.refresh_from_db()
    assert job.state == "paused"
    assert list(job.results.values_list("status", flat=True)) == ["needs_conversion", "pending", "pending"]
    services.resume(job)
    job = services.run_inline(job)
    assert job.state == "succeeded" and job.runner == "celery"


def test_cancel_takes_effect_between_threads(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE})
    job = services.run_inline(job, on_result=lambda r: services.cancel(r.job))

    assert job.state == "cancelled" and job.finished_at
    assert list(job.results.values_list("status", flat=True)) == ["needs_conversion", "skipped", "skipped"]
    with pytest.raises(InvalidTransition):
        services.cancel(job)
    with pytest.raises(InvalidTransition):
        services.resume(job)


def test_cancel_of_a_job_with_a_running_thread_waits_for_it(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE}, JobOptions(max_in_flight=2))
    batch = services.claim_batch(job.pk)
    ThreadResult.objects.filter(pk=batch.sends[0].result_ids[0]).update(status="running")
    job = services.cancel(job)
    assert job.state == "cancelling"
    assert sorted(job.results.values_list("status", flat=True)) == ["running", "skipped", "skipped"]


def _killed_mid_thread(result_id: int) -> None:
    """The row as a worker killed while running it leaves it (another host: only a redelivery reclaims it)."""
    ThreadResult.objects.filter(pk=result_id).update(status="running", attempts=1, worker_host="gone-host",
                                                     worker_pid=4242)


def test_a_thread_killed_while_its_job_was_paused_is_finished_by_the_redelivery(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE}, JobOptions(max_in_flight=1))
    ((result_id,), _), = services.claim_batch(job.pk).sends
    _killed_mid_thread(result_id)
    services.pause(job)

    assert not services.run_thread(result_id).ran  # not a redelivery: a live worker elsewhere may own it
    run = services.run_thread(result_id, reclaim=True)  # the redelivery after the worker was lost
    assert run.ran and run.result.status == "needs_conversion" and run.result.attempts == 2
    job.refresh_from_db()
    assert job.state == "paused" and services.claim_batch(job.pk).sends == []  # paused: nothing new starts
    assert sorted(job.results.values_list("status", flat=True)) == ["needs_conversion", "pending", "pending"]
    services.resume(job)
    job = services.run_inline(job)
    assert job.state == "succeeded"
    assert list(job.results.values_list("status", flat=True)) == ["needs_conversion"] * 3


def test_a_thread_killed_while_its_job_was_cancelling_is_finished_and_the_job_ends(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE}, JobOptions(max_in_flight=1))
    ((result_id,), _), = services.claim_batch(job.pk).sends
    _killed_mid_thread(result_id)
    assert services.cancel(job).state == "cancelling"  # waits for the started thread

    run = services.run_thread(result_id, reclaim=True)
    assert run.ran and run.result.status == "needs_conversion"
    assert services.claim_batch(job.pk).state == "cancelled"
    assert sorted(job.results.values_list("status", flat=True)) == ["needs_conversion", "skipped", "skipped"]


def test_a_redelivery_never_restarts_a_thread_that_finished(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    ((result_id,), _), = services.claim_batch(job.pk).sends
    assert services.run_thread(result_id).ran
    again = services.run_thread(result_id, reclaim=True)
    assert not again.ran and again.result.attempts == 1 and again.result.status == "needs_conversion"


def test_retry_reruns_only_failed_threads_with_the_same_arguments(finished_job, manager):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-9t", "nope", "also-nope"]},
                       throttle_delay_s=0.0, max_in_flight=3, integrity=False)
    again = services.retry(job, manager)

    assert again.parent_id == job.pk and again.kind == "dry_run"
    assert again.selection == {"thread_ids": ["nope", "also-nope"]}
    assert (again.max_in_flight, again.integrity, again.created_by) == (3, False, manager)
    with pytest.raises(InvalidTransition):
        services.retry(services.run_inline(services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})),
                       manager)


def test_revert_restores_the_converted_threads(finished_job, small_db):
    before = _rows(small_db, "delta-f10-fork")
    convert_job = finished_job("convert", {"thread_ids": ["delta-f10-fork", "full-short-3t"]}, confirmed=True)
    assert _rows(small_db, "delta-f10-fork") != before

    job = services.run_inline(services.revert(convert_job, None))
    assert job.source_job_id == convert_job.pk and _statuses(job) == {"delta-f10-fork": "reverted"}
    assert _rows(small_db, "delta-f10-fork") == before
    assert [b.status for b in convert.list_backups(small_db, "delta-f10-fork")] == ["restored"]
    with pytest.raises(InvalidSelection):  # a restored backup cannot be restored twice
        services.revert(convert_job, None)


def _rows(database, thread_id: str) -> list[tuple]:
    import sqlite3
    from pathlib import Path

    with sqlite3.connect(Path(database.sqlite_dir) / "deerflow.db") as conn:
        return conn.execute("SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
                            "FROM checkpoints WHERE thread_id = ? ORDER BY 1, 2", [thread_id]).fetchall()


def test_a_row_is_run_once_even_if_two_processes_try(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    ((result_id,), _), = services.claim_batch(job.pk).sends

    first = services.run_thread(result_id)
    second = services.run_thread(result_id)
    assert first.ran and not second.ran
    assert second.result.status == "needs_conversion" and second.result.attempts == 1


def test_a_redelivered_task_reclaims_a_row_stuck_in_running(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    ((result_id,), _), = services.claim_batch(job.pk).sends
    ThreadResult.objects.filter(pk=result_id).update(status="running", attempts=1, worker_host="elsewhere",
                                                     worker_pid=12345)

    assert not services.run_thread(result_id).ran  # another live process may own it
    run = services.run_thread(result_id, reclaim=True)
    assert run.ran and run.result.status == "needs_conversion" and run.result.attempts == 2


def test_a_row_whose_local_worker_died_is_reclaimed_without_redelivery_flag(delta_rt):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    ((result_id,), _), = services.claim_batch(job.pk).sends
    ThreadResult.objects.filter(pk=result_id).update(status="running", attempts=1, worker_host=socket.gethostname(),
                                                     worker_pid=int(dead.stdout))
    assert services.run_thread(result_id).ran


def test_a_conversion_committed_by_a_killed_attempt_is_recorded_with_its_backup(delta_rt, small_db):
    job = services.create_job(None, "convert", {"thread_ids": ["delta-f10-9t"]}, JobOptions(confirmed=True))
    ((result_id,), _), = services.claim_batch(job.pk).sends
    # The first attempt committed its conversion, then its worker died before recording it.
    committed = convert.convert_thread(small_db, "delta-f10-9t", note=f"dashboard job {job.pk}")
    ThreadResult.objects.filter(pk=result_id).update(status="running", attempts=1, worker_host="gone")

    run = services.run_thread(result_id, reclaim=True)
    assert run.result.status == "converted" and run.result.backup_id == committed.backup_id
    assert run.result.attempts == 2


def test_a_time_limit_past_the_commit_records_the_conversion_and_one_before_it_records_the_limit(delta_rt, small_db):
    """A hard time limit stops the process either before the commit (rolled back) or between the commit and the
    recording: the row then says ``converted`` with the backup the transaction wrote, never a failure."""
    from celery.exceptions import TimeLimitExceeded

    job = services.create_job(None, "convert", {"thread_ids": ["delta-f10-9t", "delta-f10-10t"]},
                              JobOptions(confirmed=True))
    ids = dict(ThreadResult.objects.filter(job=job).values_list("thread_id", "pk"))
    committed = convert.convert_thread(small_db, "delta-f10-9t", note=f"dashboard job {job.pk}")
    ThreadResult.objects.filter(job=job).update(status="running", attempts=1)

    assert services.record_failure(ids["delta-f10-9t"], TimeLimitExceeded(1)) == job.pk
    assert services.record_failure(ids["delta-f10-10t"], TimeLimitExceeded(1)) == job.pk

    after = {r.thread_id: r for r in ThreadResult.objects.filter(job=job)}
    done, stopped = after["delta-f10-9t"], after["delta-f10-10t"]
    assert (done.status, done.error_code, done.backup_id) == ("converted", "", committed.backup_id)
    assert committed.backup_id in done.hint
    assert (stopped.status, stopped.error_code, stopped.backup_id) == ("error", "time_limit", "")
    assert "DASHBOARD_TASK_TIME_LIMIT_S" in stopped.hint


def test_a_superseded_attempt_does_not_overwrite_the_newer_one(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    ((result_id,), _), = services.claim_batch(job.pk).sends
    ThreadResult.objects.filter(pk=result_id).update(status="running", attempts=5)
    report = convert.ThreadReport(thread_id="delta-f10-1t", status="blocked")
    assert not record_outcome(result_id, 4, Outcome(report))
    assert ThreadResult.objects.get(pk=result_id).status == "running"


def test_a_transient_database_error_puts_the_row_back_for_a_retry(delta_rt, monkeypatch):
    import sqlite3

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(convert, "dry_run_thread", locked)
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    ((result_id,), _), = services.claim_batch(job.pk).sends
    with pytest.raises(TransientDatabaseError):
        services.run_thread(result_id)
    assert ThreadResult.objects.get(pk=result_id).status == "queued"


def test_an_unexpected_error_is_recorded_as_data(delta_rt, monkeypatch):
    def boom(*args, **kwargs):
        raise ValueError("surprise")

    monkeypatch.setattr(convert, "dry_run_thread", boom)
    job = services.run_inline(services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]}))
    row = job.results.get()
    assert (row.status, row.error, row.error_code) == ("error", "ValueError: surprise", "unexpected_error")
    assert job.state == "failed"


def test_dispatch_respects_max_in_flight_and_staggers_by_the_throttle(delta_rt):
    job = services.create_job(None, "dry_run", {"thread_ids": THREE + ["delta-f10-1t"]}, JobOptions(max_in_flight=2,
                              throttle_delay_s=1.5))
    first = services.claim_batch(job.pk)
    assert [c for _, c in first.sends] == [0.0, 1.5] and first.state == "running"
    assert services.claim_batch(job.pk).sends == []  # both slots taken

    services.run_thread(first.sends[0].result_ids[0])
    nxt = services.claim_batch(job.pk)
    assert len(nxt.sends) == 1 and nxt.sends[0][1] == 1.5  # the next thread waits for the throttle
