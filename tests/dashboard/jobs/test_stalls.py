"""Thread tasks the broker lost (dashboard.jobs.stalls): found by age past their due time and sent again once.

The sends here go to the suite's configured broker (Kombu's filesystem
transport under ``var/``); nothing consumes them, so a row stays ``queued``
exactly as it does after a broker restart lost its message.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from dashboard.jobs import services, stalls
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.services import JobOptions
from tests.dashboard.jobs.conftest import DELTA_SMALL

pytestmark = pytest.mark.django_db


def _queued_job(*, throttle_delay_s: float = 0.0, max_in_flight: int = 2, runner: str = "celery") -> ConversionJob:
    """A running dry-run job whose first ``max_in_flight`` rows were claimed (``queued``) and never taken."""
    job = services.create_job(None, ConversionJob.Kind.DRY_RUN, {"thread_ids": DELTA_SMALL[:3]},
                              JobOptions(runner=runner,
                              throttle_delay_s=throttle_delay_s, max_in_flight=max_in_flight, launched_by="test"))
    services.claim_batch(job.pk)
    job.refresh_from_db()
    return job


def _age(job: ConversionJob, seconds: float) -> None:
    job.results.filter(status=ThreadResult.QUEUED).update(queued_at=timezone.now() - dt.timedelta(seconds=seconds))


def test_claiming_records_when_each_task_falls_due(delta_rt):
    before = timezone.now()
    job = _queued_job(throttle_delay_s=30.0, max_in_flight=3)
    due = list(job.results.filter(status=ThreadResult.QUEUED).values_list("queued_at", flat=True))
    assert len(due) == 3
    # The first thread starts at once, the next ones 30 s apart (the throttle's countdowns).
    assert [round((d - due[0]).total_seconds()) for d in due] == [0, 30, 60]
    assert before <= due[0] <= timezone.now()


def test_rows_queued_past_the_threshold_are_sent_again_once(delta_rt):
    job = _queued_job()
    _age(job, 700)
    sent: list[int] = []
    ids = stalls.requeue_stalled(600, sent.append)
    queued = list(job.results.filter(status=ThreadResult.QUEUED).values_list("id", flat=True))
    assert ids == sent == queued and len(ids) == 2
    # Each row's clock restarts: the next sweep waits a whole threshold again.
    assert stalls.requeue_stalled(600, sent.append) == []
    assert stalls.stalled_rows(600) == 0 and stalls.stalled_rows(0) == 2
    assert list(job.results.values_list("status", flat=True)) == ["queued", "queued", "pending"]


def test_rows_within_the_threshold_paused_jobs_and_inline_jobs_are_left_alone(delta_rt):
    fresh = _queued_job()
    _age(fresh, 30)
    inline = _queued_job(runner="inline")
    _age(inline, 7000)
    paused = _queued_job()
    _age(paused, 7000)
    services.pause(paused)
    sent: list[int] = []
    assert stalls.requeue_stalled(600, sent.append) == [] and sent == []
    assert stalls.stalled_rows(600) == 0


def test_a_send_that_fails_leaves_its_row_for_the_next_sweep(delta_rt):
    job = _queued_job()
    _age(job, 700)
    first, second = job.results.filter(status=ThreadResult.QUEUED).values_list("id", flat=True)
    sent: list[int] = []

    def send(result_id: int) -> None:
        if result_id == second:
            raise ConnectionError("broker down")
        sent.append(result_id)

    with pytest.raises(ConnectionError):
        stalls.requeue_stalled(600, send)
    assert sent == [first]
    assert stalls.requeue_stalled(600, sent.append) == [second]


def test_a_negative_threshold_is_refused(delta_rt):
    with pytest.raises(ValueError, match="0 or more seconds"):
        stalls.requeue_stalled(-1, print)
    with pytest.raises(CommandError, match="--older-than must be 0 or more seconds; got -5"):
        call_command("requeue_stalled_threads", "--older-than", "-5")


def _broker_messages() -> dict[Path, dict]:
    folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    return {p: json.loads(p.read_text()) for p in folder.glob("*.msg")}


def test_the_command_sends_a_run_thread_task_per_stalled_row(delta_rt, capsys):
    job = _queued_job()
    _age(job, 700)
    rows = list(job.results.filter(status=ThreadResult.QUEUED).order_by("id"))
    call_command("requeue_stalled_threads", "--dry-run")
    assert capsys.readouterr().out.strip() == "2 thread tasks queued for more than 600 s past their due time."
    before = _broker_messages()
    call_command("requeue_stalled_threads")
    out = capsys.readouterr().out.splitlines()
    new = {p: m for p, m in _broker_messages().items() if p not in before}
    try:
        assert out == [*(f"sent again: job {job.pk} thread {r.thread_id} (row {r.pk})" for r in rows),
                       "2 thread tasks sent again."]
        assert sorted((m["headers"]["task"], m["headers"]["argsrepr"]) for m in new.values()) == \
            sorted(("jobs.run_thread", f"({r.pk},)") for r in rows)
        assert all(p.name.endswith(".checkpoints.delta.msg") for p in new)
    finally:
        for path in new:
            path.unlink(missing_ok=True)
    call_command("requeue_stalled_threads")
    assert capsys.readouterr().out.strip() == "0 thread tasks sent again."


def test_the_job_page_says_when_tasks_are_stalled_and_what_to_do(delta_rt, staff_client):
    job = _queued_job()
    page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-stalled"' not in page
    _age(job, 700)
    page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-stalled"' in page
    assert "2 thread tasks still queued 10 min 00 s after falling due" in page
    assert "python manage.py requeue_stalled_threads" in page and "pause and resume" in page
