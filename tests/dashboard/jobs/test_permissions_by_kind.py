"""Every action on a job or a backup needs the permission of the kind of job that made it, on every route.

Walks each POST route of the jobs pages and of ``POST /api/jobs`` with each persona: conversions only
(``manager``), retention only (``pruner``), both, staff without a job permission (``viewer``) and anonymous.
A route's needed permissions come from the job or backup it acts on (a prune's backup, a revert of a prune:
``jobs.manage_retention``; a conversion's: ``jobs.manage_conversions``; a revert restoring both: both).
The rules live in :mod:`dashboard.jobs.kinds.permissions`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from dashboard.jobs import kinds, services
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import JobOptions, run_inline
from tests.deerflow.convert.support import open_saver

pytestmark = pytest.mark.django_db

CONV, RET = kinds.MANAGE_CONVERSIONS, kinds.MANAGE_RETENTION
CONVERTED, PRUNED, FULL, SPARE = "delta-f10-1t", "delta-f10-9t", "full-short-3t", "delta-f10-10t"


@dataclass
class World:
    """Finished jobs of every writing kind, their backups, and two reverts not yet run."""

    dry_run: ConversionJob
    convert: ConversionJob
    compact_dry_run: ConversionJob
    prune_dry_run: ConversionJob
    prune: ConversionJob
    convert_backup: str
    prune_backup: str
    revert_of_convert: ConversionJob
    revert_of_prune_backup: ConversionJob


def _run(kind: str, selection: dict[str, Any] | None, **options: Any) -> ConversionJob:
    job = run_inline(services.create_job(None, kind, selection, JobOptions(launched_by="test", **options)))
    assert job.state == ConversionJob.State.SUCCEEDED, (kind, list(job.results.values("status", "error")))
    return job


@pytest.fixture
def world(delta_rt, small_db) -> World:
    with open_saver(small_db):  # LangGraph's setup() migrates the fixture file first (writes.task_path)
        pass
    dry = _run("dry_run", {"thread_ids": [CONVERTED]})
    conv = _run("convert", None, source_job=dry)
    compact_dry = _run("compact_dry_run", {"thread_ids": [FULL]})
    prune_dry = _run("prune_dry_run", {"thread_ids": [PRUNED]}, retention={"rule": "keep_last", "keep_last": 3})
    prune = _run("prune", None, source_job=prune_dry, confirmed=True, retention={"backup": True})
    convert_backup = conv.results.get().backup_id
    prune_backup = prune.results.get().backup_id
    assert convert_backup and prune_backup
    revert_conv = services.create_job(None, "revert", None, JobOptions(source_job=conv, launched_by="test"))
    revert_prune = services.create_job(None, "revert", {"backup_ids": [prune_backup]}, JobOptions(launched_by="test"))
    return World(dry, conv, compact_dry, prune_dry, prune, convert_backup, prune_backup, revert_conv, revert_prune)


@dataclass(frozen=True)
class Route:
    """One request: what it needs, and what a user holding that answers."""

    name: str
    path: str
    data: dict[str, Any]
    needs: frozenset[str]
    allowed: int

    @property
    def api(self) -> bool:
        return self.path.startswith("/api/")


def _routes(w: World) -> list[Route]:
    conv, ret, both = frozenset({CONV}), frozenset({RET}), frozenset({CONV, RET})
    keep = {"rule": "keep_last", "keep_last": 3}
    return [
        Route("launch a dry run", "/jobs/launch", {"thread_id": SPARE}, conv, 302),
        Route("launch a compaction dry run", "/jobs/compact/launch", {"thread_id": FULL}, conv, 302),
        Route("launch a prune dry run", "/jobs/prune/launch", {"thread_id": SPARE, **keep}, ret, 302),
        Route("confirm a compaction", f"/jobs/{w.compact_dry_run.pk}/compact", {}, conv, 302),
        Route("confirm a prune", f"/jobs/{w.prune_dry_run.pk}/prune", {"understood": "on"}, ret, 302),
        Route("retry a conversion", f"/jobs/{w.convert.pk}/action", {"action": "retry"}, conv, 409),
        Route("cancel a prune", f"/jobs/{w.prune.pk}/action", {"action": "cancel"}, ret, 409),
        Route("revert a conversion", f"/jobs/{w.convert.pk}/action", {"action": "revert"}, conv, 302),
        Route("revert a prune", f"/jobs/{w.prune.pk}/action", {"action": "revert"}, ret, 302),
        Route("pause a revert of a conversion", f"/jobs/{w.revert_of_convert.pk}/action", {"action": "pause"},
              conv, 302),
        Route("cancel a revert of a prune's backup", f"/jobs/{w.revert_of_prune_backup.pk}/action",
              {"action": "cancel"}, ret, 302),
        Route("revert a conversion's backup", "/jobs/backups/revert", {"backup_id": w.convert_backup}, conv, 302),
        Route("revert a prune's backup", "/jobs/backups/revert", {"backup_id": w.prune_backup}, ret, 302),
        Route("reclaim", "/jobs/reclaim", {"confirm": "on"}, conv, 302),
        Route("save a retention policy", "/jobs/policies/new",
              {"name": "p", "schedule": "0 3 * * *", "rule": "keep_last", "keep_last": 5, "backup": "on"}, ret, 302),
        Route("API dry run", "/api/jobs", {"kind": "dry_run", "thread_ids": [SPARE]}, conv, 201),
        Route("API convert from its dry run", "/api/jobs", {"kind": "convert", "estimate_job": w.dry_run.pk},
              conv, 201),
        Route("API prune dry run", "/api/jobs", {"kind": "prune", "dry_run": True, "thread_ids": [SPARE], **keep},
              ret, 201),
        Route("API revert of a conversion", "/api/jobs", {"kind": "revert", "estimate_job": w.convert.pk}, conv, 201),
        Route("API revert of a prune", "/api/jobs", {"kind": "revert", "estimate_job": w.prune.pk}, ret, 201),
        Route("API revert of a conversion's backup", "/api/jobs",
              {"kind": "revert", "backup_ids": [w.convert_backup]}, conv, 201),
        Route("API revert of a prune's backup", "/api/jobs", {"kind": "revert", "backup_ids": [w.prune_backup]},
              ret, 201),
        Route("API revert of both backups", "/api/jobs",
              {"kind": "revert", "backup_ids": [w.convert_backup, w.prune_backup]}, both, 201),
        Route("API reclaim", "/api/jobs", {"kind": "reclaim", "confirm": True}, conv, 201),
        # last: a purge makes its backup unrevertible for the routes above
        Route("purge a conversion's backup", "/jobs/backups/purge", {"backup_id": w.convert_backup, "confirm": "on"},
              conv, 302),
        Route("purge a prune's backup", "/jobs/backups/purge", {"backup_id": w.prune_backup, "confirm": "on"},
              ret, 302),
    ]


def _client(django_user_model, persona: str) -> tuple[Client, frozenset[str]]:
    held = {"conversions_only": {CONV}, "retention_only": {RET}, "both": {CONV, RET}, "staff_without": set(),
            "anonymous": None}[persona]
    client = Client()
    if held is None:
        return client, frozenset()
    user = django_user_model.objects.create_user(persona, password="x", is_staff=True)
    for perm in held:
        user.user_permissions.add(Permission.objects.get(codename=perm.split(".")[1]))
    client.force_login(user)
    return client, frozenset(held)


def _post(client: Client, route: Route):
    if route.api:
        return client.post(route.path, json.dumps(route.data), content_type="application/json")
    return client.post(route.path, route.data)


@pytest.mark.parametrize("persona", ["conversions_only", "retention_only", "both", "staff_without", "anonymous"])
def test_every_job_and_backup_route_needs_the_permission_of_the_kind_that_made_it(world, django_user_model,
                                                                                   persona):
    client, held = _client(django_user_model, persona)
    answers = {}
    for route in _routes(world):
        response = _post(client, route)
        if persona == "anonymous":
            expected = 401 if route.api else 302
        else:
            expected = route.allowed if route.needs <= held else 403
        answers[route.name] = (response.status_code, expected)
        if persona == "anonymous" and not route.api:
            assert response["Location"].startswith("/accounts/login/"), route.name
        if expected == 403:
            body = response.json()["hint"] if route.api else response.content.decode()
            assert min(route.needs - held) in body, route.name  # the refusal names what to ask for
    assert {name: got for name, (got, _) in answers.items()} == {name: want for name, (_, want) in answers.items()}


def test_the_backup_pages_offer_their_buttons_by_the_kind_that_wrote_the_backup(world, django_user_model):
    pruner, _ = _client(django_user_model, "retention_only")
    manager, _ = _client(django_user_model, "conversions_only")
    for path, form in (("/jobs/backups/revert", b'id="revert-form"'), ("/jobs/backups/purge", b'id="purge-form"')):
        mine = pruner.get(path, {"backup_id": world.prune_backup})
        theirs = manager.get(path, {"backup_id": world.prune_backup})
        assert (mine.status_code, theirs.status_code) == (200, 200)
        assert form in mine.content and form not in theirs.content and RET.encode() in theirs.content
        assert form not in pruner.get(path, {"backup_id": world.convert_backup}).content
    revert_page = manager.get(f"/jobs/{world.prune.pk}/revert")
    assert b'id="revert-job-form"' not in revert_page.content and RET.encode() in revert_page.content
    cancel_buttons = pruner.get(f"/jobs/{world.revert_of_prune_backup.pk}/").content
    assert b'value="cancel"' in cancel_buttons
    assert b'value="cancel"' not in manager.get(f"/jobs/{world.revert_of_prune_backup.pk}/").content
