"""dashboard.jobs.tasks: the retry policy, routing, fan-out and failure recording (the broker is the boundary).

The real broker and worker are exercised in ``test_worker_brokers.py``; here
the tasks run eagerly in this process, or their sends are captured.
"""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from django.db.utils import OperationalError as DjangoOperationalError

from dashboard.celery import app
from dashboard.errors.jobs import TransientDatabaseError, is_transient
from dashboard.jobs import services, tasks
from dashboard.jobs.models import ThreadResult
from dashboard.jobs.services import JobOptions

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager():
    """Run tasks in this process as they are sent (restored afterwards)."""
    old = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = old


@pytest.fixture
def sent(monkeypatch) -> list[dict]:
    """Capture ``jobs.run_threads`` sends instead of talking to a broker."""
    calls: list[dict] = []
    monkeypatch.setattr(tasks.run_threads, "apply_async",
                        lambda args, **kw: calls.append({"args": args, **kw}))
    return calls


def test_the_policy_is_declared_on_the_tasks():
    for task in (tasks.dispatch, tasks.run_threads, tasks.run_thread):
        assert task.acks_late is True and task.reject_on_worker_lost is True
        assert task.autoretry_for == (TransientDatabaseError,)
        assert task.max_retries == 5
    assert tasks.THREAD_QUEUE == "checkpoints.delta"


@pytest.mark.parametrize(("exc", "transient"), [
    (psycopg.OperationalError("server closed the connection"), True),
    (sqlite3.OperationalError("database is locked"), True),
    (DjangoOperationalError("database is locked"), True),
    (sqlite3.OperationalError("no such table: checkpoints"), False),
    (ValueError("locked"), False),
])
def test_only_named_database_errors_are_transient(exc, transient):
    assert is_transient(exc) is transient


def test_wrapped_transient_errors_are_recognised():
    try:
        try:
            raise psycopg.OperationalError("connection lost")
        except psycopg.OperationalError as inner:
            raise DjangoOperationalError("wrapped") from inner
    except DjangoOperationalError as outer:
        assert is_transient(outer)


def test_dispatch_sends_up_to_max_in_flight_to_the_delta_queue(delta_rt, sent):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t", "delta-f10-9t", "delta-f10-10t"]},
                              JobOptions(max_in_flight=2, throttle_delay_s=3))
    assert tasks.dispatch.run(job.pk) == {"job_id": job.pk, "state": "running", "sent": 2}
    assert [(c["args"], c["queue"], c["countdown"]) for c in sent] == [
        (([job.results.all()[0].pk],), "checkpoints.delta", None),
        (([job.results.all()[1].pk],), "checkpoints.delta", 3)]


def test_a_thread_task_runs_its_row_then_sends_the_next_after_the_throttle(delta_rt, sent):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t", "delta-f10-9t"]},
                              JobOptions(throttle_delay_s=2))
    tasks.dispatch.run(job.pk)
    first = sent.pop()["args"][0]

    out = tasks.run_threads.apply(args=(first,)).get()
    assert out == {"result_ids": first, "statuses": ["needs_conversion"], "ran": 1}
    assert [(c["args"], c["countdown"]) for c in sent] == [(([job.results.all()[1].pk],), 2)]


def test_eager_launch_runs_the_whole_job(delta_rt, eager, django_capture_on_commit_callbacks):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t", "delta-f10-9t", "nope"]},
                              JobOptions(max_in_flight=2))
    with django_capture_on_commit_callbacks(execute=True):
        services.launch(job)
    job.refresh_from_db()
    assert job.state == "partially_failed"
    assert sorted(job.results.values_list("status", flat=True)) == ["needs_conversion", "needs_conversion",
                                                                   "not_found"]


def test_a_redelivered_message_reclaims_its_running_row(delta_rt, sent):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    tasks.dispatch.run(job.pk)
    row = ThreadResult.objects.get(job=job)
    ThreadResult.objects.filter(pk=row.pk).update(status="running", attempts=1, worker_host="dead-host")

    assert tasks.run_thread.apply(args=(row.pk,)).get()["ran"] is False
    tasks.run_thread.push_request(delivery_info={"redelivered": True}, hostname="delta-1@host")
    try:
        redelivered = tasks.run_thread.run(row.pk)
    finally:
        tasks.run_thread.pop_request()
    assert redelivered == {"result_id": row.pk, "status": "needs_conversion", "ran": True}
    assert ThreadResult.objects.get(pk=row.pk).worker_node == "delta-1@host"


def test_a_task_that_fails_for_good_is_recorded_and_the_job_moves_on(delta_rt, sent):
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    tasks.dispatch.run(job.pk)
    row = ThreadResult.objects.get(job=job)

    tasks.run_thread.on_failure(TransientDatabaseError("database is locked"), "task-id", (row.pk,), {}, None)
    row.refresh_from_db()
    job.refresh_from_db()
    assert (row.status, row.error_code) == ("error", "task_failed") and "locked" in row.error
    assert job.state == "failed"


def test_a_send_that_fails_puts_the_row_back_to_pending(delta_rt, monkeypatch):
    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.run_threads, "apply_async", broker_down)
    job = services.create_job(None, "dry_run", {"thread_ids": ["delta-f10-1t"]})
    with pytest.raises(ConnectionError):
        tasks.dispatch.run(job.pk)
    assert ThreadResult.objects.get(job=job).status == "pending"
