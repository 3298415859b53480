"""``/jobs/backups/``: backups with size and status; ``POST /jobs/backups/purge``."""

from __future__ import annotations

import pytest
from django.test import Client

from deerflow import convert
from tests.dashboard.jobs.pages import tags

pytestmark = pytest.mark.django_db


@pytest.fixture
def converted(finished_job):
    job = finished_job("convert", {"thread_ids": ["delta-f10-1t", "delta-f10-9t"]}, confirmed=True)
    return {r.thread_id: r.backup_id for r in job.results.all()}


def test_it_lists_backups_with_size_and_status(converted, small_db, viewer_client):
    body = viewer_client.get("/jobs/backups/").content.decode()
    for info in convert.list_backups(small_db):
        (row,) = tags(body, "tr", data_backup_id=info.backup_id)
        assert info.thread_id in body and "active" in body
    assert not tags(body, "form", action="/jobs/backups/purge")  # viewers cannot purge


def test_purge_deletes_the_backup_rows(converted, small_db, manager_client):
    backup_id = converted["delta-f10-9t"]
    assert tags(manager_client.get("/jobs/backups/").content, "a", href=f"/jobs/backups/purge?backup_id={backup_id}")

    response = manager_client.post("/jobs/backups/purge", {"backup_id": backup_id, "confirm": "on"})
    assert response.status_code == 302 and response["Location"] == "/jobs/backups/"
    statuses = {b.backup_id: b.status for b in convert.list_backups(small_db)}
    assert statuses[backup_id] == "purged" and statuses[converted["delta-f10-1t"]] == "active"

    again = manager_client.post("/jobs/backups/purge", {"backup_id": backup_id, "confirm": "on"})
    assert again.status_code == 409 and b"backup_purged" in again.content
    assert b"was already purged: its rows are gone" in again.content


def test_purge_needs_the_cannot_be_undone_box(converted, small_db, manager_client):
    backup_id = converted["delta-f10-9t"]
    boxes = tags(manager_client.get("/jobs/backups/purge", {"backup_id": backup_id}).content, "input",
                 type="checkbox", name="confirm")
    assert len(boxes) == 1 and "required" in boxes[0]
    response = manager_client.post("/jobs/backups/purge", {"backup_id": backup_id})
    assert response.status_code == 400 and b"invalid_parameters" in response.content
    assert b"cannot be undone" in response.content
    assert {b.status for b in convert.list_backups(small_db)} == {"active"}


def test_purging_an_unknown_backup_is_a_404(converted, manager_client):
    response = manager_client.post("/jobs/backups/purge", {"backup_id": "nope", "confirm": "on"})
    assert response.status_code == 404 and b"backup_not_found" in response.content


def test_a_viewer_may_not_purge(converted, small_db, viewer_client):
    assert viewer_client.post("/jobs/backups/purge",
                              {"backup_id": converted["delta-f10-9t"], "confirm": "on"}).status_code == 403
    assert {b.status for b in convert.list_backups(small_db)} == {"active"}


def test_purge_enforces_csrf(converted, manager):
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    assert client.post("/jobs/backups/purge", {"backup_id": converted["delta-f10-9t"]}).status_code == 403
