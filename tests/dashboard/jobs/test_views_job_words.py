"""A job's page says what the job did in its own kind's terms, and a failed dry run never reads as a no-op."""

from __future__ import annotations

import pytest
from django.utils import timezone

from dashboard.jobs.models import ConversionJob, ThreadResult
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db


def _job(kind: str, state: str, rows: list[tuple[str, str, int]]) -> ConversionJob:
    now = timezone.now()
    retention = {"rule": "keep_last", "keep_last": 5, "protect": [], "backup": True} if "prune" in kind else {}
    job = ConversionJob.objects.create(kind=kind, state=state, runner="inline", selection={"thread_ids": ["t"]},
                                       started_at=now, finished_at=now, retention=retention)
    for thread_id, status, rewritten in rows:
        ThreadResult.objects.create(job=job, thread_id=thread_id, status=status, checkpoints_rewritten=rewritten,
                                    error="boom" if status == "error" else "", finished_at=now)
    return job


def test_a_failed_dry_run_does_not_say_nothing_needs_conversion(delta_rt, staff_client):
    job = _job("dry_run", "failed", [("delta-f10-9t", "error", 0)])
    text = parse(staff_client.get(f"/jobs/{job.pk}/").content).find("p", id="estimate-none").text
    assert text.startswith("This dry run failed: its results say nothing about which threads need conversion.")
    assert "No thread of this dry run needs conversion." not in staff_client.get(f"/jobs/{job.pk}/").content.decode()


def test_a_succeeded_dry_run_with_nothing_to_do_says_so(delta_rt, staff_client):
    job = _job("compact_dry_run", "succeeded", [("delta-f10-9t", "already_delta", 0)])
    text = parse(staff_client.get(f"/jobs/{job.pk}/").content).find("p", id="estimate-none").text
    assert text == "No thread of this dry run needs compaction."


@pytest.mark.parametrize(("kind", "rows", "expected"), [
    ("compact_dry_run", [("a", "needs_compaction", 152)], "152 checkpoints would be rewritten"),
    ("dry_run", [("a", "needs_conversion", 1), ("b", "needs_conversion", 2271)],
     "2,272 checkpoints would be rewritten"),
    ("compact", [("a", "compacted", 1)], "1 checkpoint rewritten"),
    ("prune_dry_run", [("a", "would_prune", 3)], "3 checkpoints would be deleted"),
    ("prune", [("a", "pruned", 3)], "3 checkpoints deleted"),
])
def test_totals_in_the_kinds_own_terms(delta_rt, staff_client, kind, rows, expected):
    job = _job(kind, "succeeded", rows)
    assert parse(staff_client.get(f"/jobs/{job.pk}/").content).find("dd", id="job-totals").text.startswith(expected)


def test_a_reclaim_job_speaks_of_the_database_not_threads(delta_rt, staff_client):
    job = _job("reclaim", "succeeded", [("(database)", "reclaimed", 0)])
    page = parse(staff_client.get(f"/jobs/{job.pk}/").content)
    counts = page.find("p", id="job-counts").text
    assert "The vacuum of the whole database ran" in counts
    assert "threads done" not in counts and "threads/min" not in counts
    assert page.find_all("dd", id="job-totals") == [] and "integrity check" not in page.find("dl").text
