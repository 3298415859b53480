"""Job pages say every result status in words, coloured by what it means (issue 14, item 5):
a dry run's ``needs_conversion`` asks for action (not green), findings carry a severity, and the runner is a phrase."""

from __future__ import annotations

import pytest

from dashboard.jobs.models import ThreadResult
from dashboard.jobs.templatetags.job_tags import STATUS_WORDS, finding_severity, status_meaning, status_words
from tests.dashboard.jobs.pages import tags
from tests.dashboard.jobs.test_stylesheet import _declarations_for

pytestmark = pytest.mark.django_db


def test_every_status_has_words_and_a_meaning():
    assert set(STATUS_WORDS) == set(ThreadResult.STATUSES)
    assert {status_meaning(s) for s in ThreadResult.STATUSES} == {"success", "action", "error", "open", "skipped"}
    assert status_words("needs_conversion") == "needs conversion" and status_meaning("needs_conversion") == "action"
    assert status_meaning("already_full") == "success" and status_meaning("refused") == "error"
    assert finding_severity({"blocking": True}) == "error" and finding_severity({"blocking": False}) == "warning"


def test_a_dry_run_needing_conversion_is_not_green(finished_job, viewer_client):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-1t", "full-short-3t"]})
    html = viewer_client.get(f"/jobs/{job.pk}/").content
    (needs,) = tags(html, "tr", data_thread_id="delta-f10-1t")
    assert needs["data-status"] == "needs_conversion"
    (label,) = [t for t in tags(html, "span", title="needs_conversion")]
    assert "meaning-action" in label["class"]
    assert _declarations_for("span", label)["color"] == "var(--warn)"
    (done,) = tags(html, "span", title="already_full")
    assert _declarations_for("span", done)["color"] == "#2e7d32"
    body = html.decode()
    assert ">needs conversion<" in body and ">already full: nothing to do<" in body
    assert "runs on Celery workers" in body or "runs inline (management command)" in body
    assert "(celery)" not in body and "(inline)" not in body
