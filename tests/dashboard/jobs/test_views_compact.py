""""Compact to delta" in the pages: the action on full and migrated thread pages and the filtered list,
the compaction dry run's estimate with the 409 warning and the full-mode processes, the confirmation, revert."""

from __future__ import annotations

import pytest
from django.utils import timezone

from dashboard.fleet.models import ProcessRecord
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import run_inline
from deerflow import convert
from tests.dashboard.jobs.pages import form_inputs, tags

pytestmark = pytest.mark.django_db


def _compact_forms(html: bytes) -> list:
    return tags(html, "form", id="compact-to-delta")


@pytest.mark.parametrize(("thread_id", "offered"), [("full-short-3t", True), ("migrated-full20-delta20", True),
                                                    ("delta-f10-9t", False)])
def test_the_thread_page_offers_compaction_for_full_and_migrated_threads(delta_rt, manager_client, thread_id, offered):
    html = manager_client.get(f"/threads/{thread_id}/").content
    forms = _compact_forms(html)
    assert len(forms) == int(offered)
    if offered:
        assert forms[0]["action"] == "/jobs/compact/launch"
        assert form_inputs(html, "compact-to-delta")["thread_id"] == thread_id


def test_a_viewer_gets_no_compact_button(delta_rt, viewer_client):
    assert _compact_forms(viewer_client.get("/threads/full-short-3t/").content) == []
    assert "/jobs/compact/launch" not in viewer_client.get("/threads/").content.decode()


def test_the_thread_list_offers_compact_matching_threads(delta_rt, manager_client):
    (button,) = tags(manager_client.get("/threads/?mode=full").content, "button", hx_post="/jobs/compact/launch")
    assert button["hx-include"] == "closest form"


def test_compact_from_the_page_then_confirm_then_revert(delta_rt, small_db, manager_client, manager):
    response = manager_client.post("/jobs/compact/launch", {"thread_id": ["full-rollback"]})
    dry = ConversionJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{dry.pk}/"
    assert (dry.kind, dry.created_by) == ("compact_dry_run", manager)
    run_inline(dry)
    page = manager_client.get(f"/jobs/{dry.pk}/").content.decode()
    assert 'id="confirm-compact"' not in page and 'id="bytes-freed"' in page and "answer 409" in page
    assert f'href="/jobs/{dry.pk}/confirm" id="review-compaction"' in page  # the only way on: the confirmation
    assert 'id="confirm-compact"' in manager_client.get(f"/jobs/{dry.pk}/confirm").content.decode()

    response = manager_client.post(f"/jobs/{dry.pk}/compact", {"throttle_delay_s": "0", "max_in_flight": "1"})
    job = ConversionJob.objects.get(kind="compact")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    job = run_inline(job)
    assert job.state == "succeeded" and job.results.get().status == "compacted"
    page = manager_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "compacted" in page and f'href="/jobs/{job.pk}/revert"' in page
    assert [b.thread_id for b in convert.list_backups(small_db)] == ["full-rollback"]


def test_a_live_full_mode_process_is_listed_and_refuses_unless_overridden(delta_rt, manager_client):
    now = timezone.now()
    ProcessRecord.objects.create(instance_id="old", role="web", name="web@old:7", host="old", pid=7,
                                 started_at=now, last_heartbeat=now, mode="full", snapshot_frequency=10)
    manager_client.post("/jobs/compact/launch", {"thread_id": ["full-short-3t"]})
    dry = run_inline(ConversionJob.objects.get())
    page = manager_client.get(f"/jobs/{dry.pk}/").content.decode()
    assert "web@old:7" in page and 'name="force_full_fleet"' not in page
    assert 'name="force_full_fleet"' in manager_client.get(f"/jobs/{dry.pk}/confirm").content.decode()

    response = manager_client.post(f"/jobs/{dry.pk}/compact", {"max_in_flight": "1"})
    assert response.status_code == 409 and b'id="confirm-error"' in response.content  # the confirmation, again
    assert b"web@old:7" in response.content and not ConversionJob.objects.filter(kind="compact").exists()
    response = manager_client.post(f"/jobs/{dry.pk}/compact", {"max_in_flight": "1", "force_full_fleet": "on"})
    assert response.status_code == 302 and ConversionJob.objects.filter(kind="compact").exists()
