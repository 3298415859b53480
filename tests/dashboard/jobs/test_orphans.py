"""Deleting DeerFlow's orphans: ``prune_threads --delete-threads --orphaned`` and the ``orphaned`` job filter
(``POST /api/jobs``, the list's launch), previewed, backed up, reverted byte for byte, on both backends."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from dashboard.accounts.models import ApiToken
from dashboard.jobs import resolving, services
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import run_inline
from tests import fixtures_real
from tests.backends import BACKENDS
from tests.deerflow.convert.support import all_rows, backup_ids, open_saver, raw_rows
from tests.deerflow_schema import FIXTURE_META, deerflow_connection, insert_thread_meta, stand_beside_fixture

pytestmark = pytest.mark.django_db

#: The fixture threads left without a DeerFlow row (small ones, so deleting and restoring them is quick).
ORPHANS = ["delta-f10-9t", "full-rollback"]
FIXTURE_THREADS = [t["thread_id"] for t in fixtures_real.load_manifest()["threads"]]


@pytest.fixture
def pruner(django_user_model):
    """Staff with ``jobs.manage_retention``: may prune and delete threads."""
    user = django_user_model.objects.create_user("pruner", password="pruner-pass", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="manage_retention"))
    return user


@pytest.fixture(params=BACKENDS)
def orphan_db(request: pytest.FixtureRequest, runtime_for):
    """A writable fixture copy beside DeerFlow's tables where only :data:`ORPHANS` have no ``threads_meta`` row."""
    database = request.getfixturevalue(f"{request.param}_fixture_db_rw")
    with open_saver(database):  # LangGraph's setup() migrates the fixture first, so rows compare after
        pass
    stand_beside_fixture(database)
    for thread_id in FIXTURE_THREADS:
        if thread_id not in ORPHANS and thread_id not in FIXTURE_META:
            insert_thread_meta(database, thread_id, user_id="dave")
    runtime_for(database, "delta")
    return database


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("prune_threads", *args, stdout=out, stderr=err)
        return 0, out.getvalue(), err.getvalue()
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue() + str(exc)


def _deerflow_rows(database) -> list[tuple]:
    with deerflow_connection(database) as conn:
        cursor = conn.execute("SELECT thread_id, user_id, display_name FROM threads_meta ORDER BY thread_id")
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cursor.fetchall()]


def test_the_command_previews_deletes_and_the_backups_restore_the_orphans(orphan_db):
    originals = {t: raw_rows(orphan_db, t) for t in ORPHANS}
    everything, deerflow = all_rows(orphan_db), _deerflow_rows(orphan_db)
    fork = raw_rows(orphan_db, "delta-f10-fork")
    code, out, err = _run("--orphaned", "--delete-threads", "--dry-run", "--json")
    assert code == 0, err
    assert {r["thread_id"]: r["status"] for r in json.loads(out)["threads"]} == dict.fromkeys(ORPHANS, "would_delete")
    assert all_rows(orphan_db) == everything  # a preview writes nothing

    before = set(backup_ids(orphan_db))
    code, out, err = _run("--orphaned", "--delete-threads", "--yes", "--json")
    assert code == 0, err
    rows = {r["thread_id"]: r for r in json.loads(out)["threads"]}
    assert {t: r["status"] for t, r in rows.items()} == dict.fromkeys(ORPHANS, "deleted")
    assert all(raw_rows(orphan_db, t) == {k: [] for k in originals[t]} for t in ORPHANS)
    assert raw_rows(orphan_db, "delta-f10-fork") == fork  # a thread DeerFlow knows is left alone
    assert _deerflow_rows(orphan_db) == deerflow  # DeerFlow's tables are never touched
    made = sorted(set(backup_ids(orphan_db)) - before)
    assert len(made) == len(ORPHANS)

    for backup in made:
        call_command("revert_prune", backup, "--json", stdout=io.StringIO(), stderr=io.StringIO())
    assert {t: raw_rows(orphan_db, t) for t in ORPHANS} == originals
    assert all_rows(orphan_db) == everything


def test_the_command_refuses_orphans_without_deerflow_tables(sqlite_fixture_db_rw, runtime_for):
    runtime_for(sqlite_fixture_db_rw, "delta")
    code, _, err = _run("--orphaned", "--delete-threads", "--yes")
    assert code == 1 and "threads_meta" in err and "--idle-days" in err


def test_a_thread_that_is_not_idle_long_enough_is_no_orphan(orphan_db, settings):
    settings.DASHBOARD_ORPHAN_MIN_IDLE_S = 10**10  # 300 years: the fixture is younger
    code, out, err = _run("--orphaned", "--delete-threads", "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["threads"] == []


def test_the_api_filter_orphaned_deletes_through_a_job_and_the_job_reverts(orphan_db, pruner):
    originals = {t: raw_rows(orphan_db, t) for t in ORPHANS}
    everything = all_rows(orphan_db)
    token = ApiToken.issue(pruner)[1]

    def post(body):
        return Client().post("/api/jobs", json.dumps(body), content_type="application/json",
                             headers={"Authorization": f"Bearer {token}"})

    bad = post({"kind": "prune_dry_run", "filter": {"thread_class": "orphans"}, "rule": "delete_threads"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_selection" and "orphaned" in bad.json()["detail"]
    bad = post({"kind": "prune_dry_run", "filter": {"owner": "x" * 65}, "rule": "delete_threads"})
    assert bad.status_code == 400 and "owner" in bad.json()["detail"]

    response = post({"kind": "prune_dry_run", "filter": {"thread_class": "orphaned"}, "rule": "delete_threads"})
    assert response.status_code == 201, response.content
    dry = ConversionJob.objects.get(pk=response.json()["id"])
    resolving.resolve(dry.pk)
    assert sorted(dry.results.values_list("thread_id", flat=True)) == ORPHANS
    dry = run_inline(dry)
    assert set(dry.results.values_list("status", flat=True)) == {"would_delete"}
    assert all_rows(orphan_db) == everything

    response = post({"kind": "prune", "estimate_job": dry.pk})
    assert response.status_code == 201, response.content
    job = run_inline(ConversionJob.objects.get(pk=response.json()["id"]))
    assert job.state == "succeeded" and set(job.results.values_list("status", flat=True)) == {"deleted"}
    assert all(raw_rows(orphan_db, t) == {k: [] for k in originals[t]} for t in ORPHANS)

    undo = run_inline(services.revert(job, pruner))
    assert undo.state == "succeeded" and set(undo.results.values_list("status", flat=True)) == {"reverted"}
    assert all_rows(orphan_db) == everything


def test_an_orphan_deerflow_adopts_after_the_dry_run_is_not_deleted(orphan_db, pruner):
    """The delete asks again, inside DeerFlow's reservation: a thread that gained its ``threads_meta`` row since
    the dry run selected it is skipped (``not_orphaned``), rows untouched; the other orphan is deleted."""
    adopted, still = ORPHANS
    kept = raw_rows(orphan_db, adopted)
    dry = services.create_job(pruner, "prune_dry_run", {"filter": {"thread_class": "orphaned"}},
                              services.JobOptions(runner="inline", retention={"rule": "delete_threads"}))
    dry = run_inline(dry)
    assert sorted(dry.results.values_list("thread_id", flat=True)) == ORPHANS
    insert_thread_meta(orphan_db, adopted, user_id="erin")  # DeerFlow adopts it between preview and delete

    job = run_inline(services.create_job(pruner, "prune", None, services.JobOptions(source_job=dry, runner="inline")))
    rows = {r.thread_id: r for r in job.results.all()}
    assert (rows[adopted].status, rows[adopted].error_code) == ("skipped", "not_orphaned")
    assert "no orphan any more" in rows[adopted].error
    assert raw_rows(orphan_db, adopted) == kept
    assert rows[still].status == "deleted" and all(not v for v in raw_rows(orphan_db, still).values())


def test_the_list_launch_carries_the_orphan_and_owner_filters(orphan_db, pruner):
    client = Client()
    client.force_login(pruner)
    response = client.post("/jobs/prune/launch", {"thread_class": "orphaned", "rule": "delete_threads"})
    assert response.status_code == 302, response.content
    job = ConversionJob.objects.get()
    assert job.selection["filter"]["thread_class"] == "orphaned"
    resolving.resolve(job.pk)
    assert sorted(job.results.values_list("thread_id", flat=True)) == ORPHANS
    response = client.post("/jobs/prune/launch", {"owner": "alice", "rule": "safe_only"})
    assert response.status_code == 302, response.content
    owned = ConversionJob.objects.latest("pk")
    resolving.resolve(owned.pk)
    assert sorted(owned.results.values_list("thread_id", flat=True)) == ["full-empty", "full-short-3t"]
