"""Pruning as a job (issue 12): ``prune_dry_run`` / ``prune`` through ``POST /api/jobs``, the pages and the
services; the permission of its own; bad input; the confirmation page; the tree's marks; revert; policies."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from dashboard.accounts.models import ApiToken, AuditEntry
from dashboard.jobs import services, tasks
from dashboard.jobs.models import ConversionJob, RetentionPolicy
from dashboard.jobs.services import JobOptions, run_inline
from dashboard.threads import storage
from deerflow import convert, inventory
from deerflow.storage.savers import open_checkpointer
from tests.dashboard.jobs.pages import form_inputs, tags
from tests.deerflow.convert.support import open_saver, raw_rows

pytestmark = pytest.mark.django_db

THREAD = "delta-f10-9t"
FULL = "full-short-3t"


@pytest.fixture
def pruner(django_user_model):
    """Staff with ``jobs.manage_retention`` only (may prune, may not convert)."""
    user = django_user_model.objects.create_user("pruner", password="pruner-pass", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="manage_retention"))
    return user


@pytest.fixture
def pruner_client(pruner):
    client = Client()
    client.force_login(pruner)
    return client


@pytest.fixture
def migrated(small_db):
    with open_saver(small_db):  # LangGraph's setup() migrates the fixture file first (writes.task_path)
        pass
    return small_db


def _post(body, user):
    return Client().post("/api/jobs", json.dumps(body), content_type="application/json",
                         headers={"Authorization": f"Bearer {ApiToken.issue(user)[1]}"})


def _count(database, thread_id):
    with open_checkpointer(database) as saver:
        summary = inventory.get_thread_summary(saver, thread_id)
    return summary.checkpoint_count if summary else 0


def test_prune_dry_run_then_prune_over_the_api_then_revert(delta_rt, migrated, pruner, pruner_client, manager_client):
    original = raw_rows(migrated, THREAD)
    before = _count(migrated, THREAD)
    response = _post({"kind": "prune", "dry_run": True, "thread_ids": [THREAD, FULL], "rule": "keep_last",
                      "keep_last": 3}, pruner)
    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "prune_dry_run"
    assert response.json()["retention"] == {"rule": "keep_last", "keep_last": 3, "protect": [], "backup": True}
    dry = run_inline(ConversionJob.objects.get(pk=response.json()["id"]))
    assert dry.state == "succeeded"
    assert raw_rows(migrated, THREAD) == original  # a dry run writes nothing

    answer = Client().get(f"/api/jobs/{dry.pk}", headers={"Authorization": f"Bearer {ApiToken.issue(pruner)[1]}"})
    rows = {r["thread_id"]: r for r in answer.json()["results"]}
    row = rows[THREAD]
    assert row["status"] == "would_prune"
    assert (len(row["kept_checkpoint_ids"]) >= 3
            and len(row["deleted_checkpoint_ids"]) == before - len(row["kept_checkpoint_ids"]))
    assert {p["reason"] for p in row["protected"]} >= {"head"}
    assert row["checkpoints_deleted"] == len(row["deleted_checkpoint_ids"]) and row["bytes_after"] < row["bytes_before"]

    storage.refresh_inventory(delta_rt, full=True)  # the summary's row, before the prune
    stale = inventory.stored_summary(delta_rt.saver, THREAD).bytes_total
    response = _post({"kind": "prune", "estimate_job": dry.pk}, pruner)
    assert response.status_code == 201, response.content
    job = run_inline(ConversionJob.objects.get(pk=response.json()["id"]))
    result = job.results.get(thread_id=THREAD)
    assert job.state == "succeeded" and result.status == "pruned" and result.backup_id
    assert result.worker_mode == "delta"
    assert sorted(result.prune["kept_checkpoint_ids"]) == sorted(row["kept_checkpoint_ids"])
    assert _count(migrated, THREAD) == len(row["kept_checkpoint_ids"])
    assert result.backup_id in [b.backup_id for b in convert.list_backups(migrated, THREAD)]

    links = tags(pruner_client.get(f"/jobs/{job.pk}/").content, "a", id="revert-job")
    assert [a["href"] for a in links] == [f"/jobs/{job.pk}/revert"]
    confirm = pruner_client.get(f"/jobs/{job.pk}/revert")  # the revert is confirmed on its own page
    assert confirm.status_code == 200 and THREAD.encode() in confirm.content
    live = inventory.get_thread_summary(delta_rt.saver, THREAD).bytes_total
    assert live < stale  # the prune kept the head: the stored row still describes it, with the old size
    assert tags(confirm.content, "td", data_bytes_now=str(live))  # the page shows the size now, not the stale row
    assert b'id="revert-job-form"' in confirm.content and b"pruned checkpoints are back" in confirm.content
    refused = manager_client.get(f"/jobs/{job.pk}/revert")  # converting is not pruning
    assert b'id="revert-job-form"' not in refused.content and b"jobs.manage_retention" in refused.content

    undo = run_inline(services.revert(job, pruner))
    assert undo.state == "succeeded" and set(undo.results.values_list("status", flat=True)) == {"reverted"}
    assert raw_rows(migrated, THREAD) == original


@pytest.mark.parametrize("body, code", [
    ({"kind": "prune_dry_run", "thread_ids": [THREAD]}, "invalid_retention"),
    ({"kind": "prune_dry_run", "thread_ids": [THREAD], "rule": "keep_newest"}, "invalid_retention"),
    ({"kind": "prune_dry_run", "thread_ids": [THREAD], "rule": "keep_last", "keep_last": 0}, "invalid_retention"),
    ({"kind": "prune_dry_run", "thread_ids": [THREAD], "rule": "keep_last", "keep_last": "5"}, "invalid_retention"),
    ({"kind": "prune_dry_run", "thread_ids": [THREAD], "rule": "safe_only", "keep_last": 5}, "invalid_retention"),
    ({"kind": "prune_dry_run", "thread_ids": [THREAD], "rule": "safe_only", "protect": "abc"}, "invalid_retention"),
    ({"kind": "prune_dry_run", "thread_ids": [THREAD], "rule": "safe_only", "backup": "no"}, "invalid_retention"),
    ({"kind": "dry_run", "thread_ids": [THREAD], "rule": "safe_only"}, "invalid_retention"),
    ({"kind": "prune", "thread_ids": [THREAD], "rule": "safe_only"}, "estimate_required"),
    ({"kind": "prune_dry_run", "filter": {"idle_days": -1}, "rule": "safe_only"}, "invalid_selection"),
    ({"kind": "prune_dry_run", "thread_ids": [THREAD], "rule": "keep_last", "keep_last": 2**63 - 1},
     "invalid_retention"),
    ({"kind": "dry_run", "thread_ids": [THREAD], "dry_run": True}, "invalid_parameters"),
])
def test_bad_prune_bodies_answer_400_with_a_code(delta_rt, pruner, manager, body, code):
    user = manager if body["kind"] == "dry_run" else pruner
    response = _post(body, user)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code and response.json()["hint"]
    assert not ConversionJob.objects.exists()


def test_a_prune_must_match_its_dry_runs_rule(delta_rt, migrated, pruner):
    dry = run_inline(services.create_job(pruner, "prune_dry_run", {"thread_ids": [THREAD]},
                                         JobOptions(retention={"rule": "keep_last", "keep_last": 3})))
    response = _post({"kind": "prune", "estimate_job": dry.pk, "rule": "keep_last", "keep_last": 1}, pruner)
    assert response.status_code == 400 and response.json()["code"] == "retention_mismatch"


def test_conversion_permission_alone_cannot_prune(delta_rt, manager, pruner):
    response = _post({"kind": "prune_dry_run", "thread_ids": [THREAD], "rule": "safe_only"}, manager)
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert "jobs.manage_retention" in response.json()["hint"]
    response = _post({"kind": "dry_run", "thread_ids": [THREAD]}, pruner)  # and retention alone cannot convert
    assert response.status_code == 403 and "jobs.manage_conversions" in response.json()["hint"]
    assert not ConversionJob.objects.exists()


def test_pages_refuse_a_conversion_manager_with_a_hint(delta_rt, manager_client):
    response = manager_client.post("/jobs/prune/launch", {"thread_id": THREAD, "rule": "safe_only"})
    assert response.status_code == 403 and b"jobs.manage_retention" in response.content
    assert b"Prune history" not in manager_client.get("/threads/").content
    assert not ConversionJob.objects.exists()


def test_launch_from_the_thread_page_then_confirm_and_redirect(delta_rt, migrated, pruner, pruner_client):
    page = pruner_client.get(f"/threads/{THREAD}/")
    assert tags(page.content, "form", id="prune-history")
    response = pruner_client.post("/jobs/prune/launch", {"thread_id": THREAD, "rule": "keep_last", "keep_last": "2"})
    assert response.status_code == 302
    dry = ConversionJob.objects.get()
    assert response["Location"] == f"/jobs/{dry.pk}/" and dry.kind == "prune_dry_run"
    run_inline(dry)
    html = pruner_client.get(f"/jobs/{dry.pk}/").content.decode()
    assert "Prune preview" in html and "head: the latest resumable state" in html
    assert tags(html, "a", id="prune-confirm-link")

    confirm = pruner_client.get(f"/jobs/{dry.pk}/prune/confirm").content.decode()
    row = dry.results.get()
    assert f"<strong>{row.checkpoints_rewritten:,} checkpoint" in confirm
    assert "cannot be undone" in confirm and tags(confirm, "form", id="confirm-prune")

    refused = pruner_client.post(f"/jobs/{dry.pk}/prune", {})  # "I have read" not ticked
    assert refused.status_code == 400 and ConversionJob.objects.count() == 1
    assert tags(refused.content, "li", data_field="understood") and tags(refused.content, "form", id="confirm-prune")
    refused = pruner_client.post(f"/jobs/{dry.pk}/prune", {"understood": "on", "throttle_delay_s": "-5"})
    assert refused.status_code == 400 and ConversionJob.objects.count() == 1  # the page again, with the field error
    assert tags(refused.content, "li", data_field="throttle_delay_s")
    assert form_inputs(refused.content, "confirm-prune")["throttle_delay_s"] == "-5"
    response = pruner_client.post(f"/jobs/{dry.pk}/prune", {"understood": "on", "no_backup": "on"})
    prune = ConversionJob.objects.get(kind="prune")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{prune.pk}/"
    assert prune.retention == {"rule": "keep_last", "keep_last": 2, "protect": [], "backup": False}
    run_inline(prune)
    assert prune.results.get().status == "pruned" and not prune.results.get().backup_id
    assert _count(migrated, THREAD) == len(row.prune["kept_checkpoint_ids"])
    assert AuditEntry.objects.filter(action="jobs:prune", username="pruner", status=302).exists()


def test_the_confirmation_page_of_a_job_that_is_no_prune_dry_run_is_409(delta_rt, finished_job, staff_client):
    job = finished_job("dry_run", {"thread_ids": [THREAD]})
    assert staff_client.get(f"/jobs/{job.pk}/prune/confirm").status_code == 409


def test_the_tree_shows_the_dry_runs_marks_escaped(delta_rt, migrated, pruner, pruner_client):
    dry = run_inline(services.create_job(pruner, "prune_dry_run", {"thread_ids": [THREAD]},
                                         JobOptions(retention={"rule": "keep_last", "keep_last": 2})))
    row = dry.results.get()
    html = pruner_client.get(f"/history/{THREAD}/?prune_job={dry.pk}&limit=500",
                             headers={"HX-Request": "true"}).content.decode()
    marks = {t["data-prune-mark"] for t in tags(html, "span") if t.get("data-prune-mark")}
    assert {"deleted", "protected"} <= marks
    deleted = [t for t in tags(html, "span", data_prune_mark="deleted")]
    assert len(deleted) == len(row.prune["deleted_checkpoint_ids"])
    assert "head: the latest resumable state" in html and "prune-legend" in html
    page = pruner_client.get(f"/threads/{THREAD}/?prune_job={dry.pk}").content.decode()
    assert f"prune_job={dry.pk}" in page and "/history/" in page  # the page's tree is loaded with the marks
    bad = pruner_client.get(f"/history/{THREAD}/?prune_job=999999", headers={"HX-Request": "true"})
    assert bad.status_code == 200 and "no prune job" in bad.content.decode()
    assert pruner_client.get(f"/history/{THREAD}/?prune_job=<b>").status_code == 400


def test_a_filter_launch_selects_both_modes(delta_rt, migrated, pruner_client):
    response = pruner_client.post("/jobs/prune/launch", {"q": "full-short", "rule": "safe_only"})
    assert response.status_code == 302
    job = ConversionJob.objects.get()
    assert job.selection["filter"]["mode"] == "any"
    assert job.state == "resolving" and not job.results.exists()  # a worker pages the filter
    from dashboard.jobs import resolving

    resolving.resolve(job.pk)
    assert list(job.results.values_list("thread_id", flat=True)) == [FULL]


def test_a_due_policy_starts_a_prune_job_through_the_beat_task(delta_rt, migrated, django_capture_on_commit_callbacks,
                                                               monkeypatch):
    sent = []
    monkeypatch.setattr(services, "_send_dispatch", sent.append)  # the broker: the real worker test sends it
    created = timezone.now() - dt.timedelta(minutes=5)
    policy = RetentionPolicy.objects.create(name="idle-keep-3", filter={"q": "delta-f10-9t"}, idle_days=0,
                                            rule="keep_last", keep_last=3, schedule="* * * * *", enabled=True,
                                            created_at=created)
    RetentionPolicy.objects.create(name="off", rule="safe_only", schedule="* * * * *", created_at=created)
    with django_capture_on_commit_callbacks(execute=True):
        ran = tasks.run_due_policies()
    job = ConversionJob.objects.get()
    assert ran == {"ran": [{"policy": "idle-keep-3", "job_id": job.pk, "error": ""}]}
    assert (job.kind, job.runner, job.launched_by) == ("prune", "celery", "policy:idle-keep-3")
    assert job.retention == {"rule": "keep_last", "keep_last": 3, "protect": [], "backup": True}
    assert sent == [job.pk]
    policy.refresh_from_db()
    assert policy.last_job_id == job.pk and policy.last_run_at is not None
    assert AuditEntry.objects.filter(username="policy:idle-keep-3", action="jobs:policy-run").exists()
    assert tasks.run_due_policies() == {"ran": []}  # not due again within the same minute

    assert job.state == job.State.RESOLVING  # the policy's filter is paged by the worker's dispatch
    from dashboard.jobs import resolving

    assert resolving.resolve(job.pk) == 1
    job.refresh_from_db()
    job.state = job.State.RUNNING
    job.save()
    (row,) = services.claim_batch(job.pk).sends
    run = services.run_thread(row.result_ids[0], worker_node="test")  # what the worker's jobs.run_thread calls
    assert run.result.status == "pruned" and _count(migrated, THREAD) == len(run.result.prune["kept_checkpoint_ids"])


def test_a_due_policy_with_nothing_to_prune_records_a_run_not_a_job(delta_rt, migrated, pruner_client,
                                                                      django_capture_on_commit_callbacks, monkeypatch):
    monkeypatch.setattr(services, "_send_dispatch", lambda job_id: None)  # run below as the worker would
    created = timezone.now() - dt.timedelta(minutes=5)
    policy = RetentionPolicy.objects.create(name="keep-many", filter={"q": "delta-f10-9t"}, rule="keep_last",
                                            keep_last=10_000, schedule="* * * * *", enabled=True, created_at=created)
    with django_capture_on_commit_callbacks(execute=True):
        tasks.run_due_policies()
    job = ConversionJob.objects.get()
    from dashboard.jobs import resolving

    resolving.resolve(job.pk)
    ConversionJob.objects.filter(pk=job.pk).update(state=job.State.RUNNING)
    (row,) = services.claim_batch(job.pk).sends
    assert services.run_thread(row.result_ids[0], worker_node="test").result.status == "nothing_to_prune"
    services.claim_batch(job.pk)  # the job finishes: folded into its policy's run
    assert not ConversionJob.objects.exists()
    policy.refresh_from_db()
    assert policy.last_run_at is not None and policy.last_job is None and policy.last_error == ""
    cell = pruner_client.get("/jobs/policies/").content.decode()
    assert "nothing to prune" in cell and "T" not in cell.split('class="policy-last-run">')[1][:12]


def test_policies_are_off_by_default_and_edited_by_retention_managers(pruner_client, manager_client):
    assert manager_client.get("/jobs/policies/").status_code == 200  # staff may read
    refused = manager_client.post("/jobs/policies/new", {"name": "x", "schedule": "0 3 * * *", "rule": "safe_only"})
    assert refused.status_code == 403 and b"jobs.manage_retention" in refused.content
    response = pruner_client.post("/jobs/policies/new", {"name": "nightly", "schedule": "0 3 * * *", "idle_days": "30",
                                                         "rule": "keep_last", "keep_last": "20", "backup": "on"})
    assert response.status_code == 302
    policy = RetentionPolicy.objects.get()
    assert (policy.enabled, policy.keep_last, policy.idle_days, policy.schedule) == (False, 20, 30.0, "0 3 * * *")
    bad = pruner_client.post(f"/jobs/policies/{policy.pk}/", {"name": "nightly", "schedule": "61 * * * *",
                                                             "rule": "keep_last", "keep_last": "0"})
    assert bad.status_code == 400 and b"policy-errors" in bad.content
    policy.refresh_from_db()
    assert policy.keep_last == 20
    assert b"nightly" in pruner_client.get("/jobs/policies/").content
    huge = pruner_client.post(f"/jobs/policies/{policy.pk}/", {"name": "nightly", "schedule": "0 3 * * *",
                                                              "idle_days": "99999999999999999999999",
                                                              "rule": "safe_only"})
    assert huge.status_code == 400 and b"idle days must be at most 36,500" in huge.content
    policy.refresh_from_db()
    assert policy.idle_days == 30.0


def test_retry_and_cancel_of_a_prune_job_need_the_retention_permission(delta_rt, migrated, pruner, pruner_client,
                                                                       manager_client):
    dry = run_inline(services.create_job(pruner, "prune_dry_run", {"thread_ids": ["no-such-thread", THREAD]},
                                         JobOptions(retention={"rule": "safe_only", "protect": ["x1"]})))
    assert dry.state == "partially_failed"
    assert dict(dry.results.values_list("thread_id", "status"))["no-such-thread"] == "not_found"
    refused = manager_client.post(f"/jobs/{dry.pk}/action", {"action": "retry"})
    assert refused.status_code == 403 and b"jobs.manage_retention" in refused.content
    response = pruner_client.post(f"/jobs/{dry.pk}/action", {"action": "retry"})
    retry = ConversionJob.objects.get(parent=dry)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{retry.pk}/"
    assert retry.selection == {"thread_ids": ["no-such-thread"]} and retry.retention == dry.retention
    assert retry.launched_by == "pruner"
    assert pruner_client.post(f"/jobs/{retry.pk}/action", {"action": "cancel"}).status_code == 302
    retry.refresh_from_db()
    assert retry.state in ("cancelled", "cancelling")


def test_a_full_mode_worker_refuses_prune_rows(runtime_for, small_db, pruner):
    runtime_for(small_db, "full")
    job = run_inline(services.create_job(pruner, "prune_dry_run", {"thread_ids": [FULL]},
                                         JobOptions(retention={"rule": "keep_last", "keep_last": 1})))
    (row,) = job.results.all()
    assert row.status == "refused" and "checkpoints.delta" in row.hint and row.worker_mode == "full"


def test_a_policy_another_run_claimed_meanwhile_starts_no_second_job(delta_rt, migrated, monkeypatch):
    from dashboard.jobs import policies

    created = timezone.now() - dt.timedelta(minutes=5)
    policy = RetentionPolicy.objects.create(name="raced", filter={"q": "delta-f10-9t"}, rule="safe_only",
                                            schedule="* * * * *", enabled=True, created_at=created)
    real_is_due = policies.is_due

    def due_but_claimed_by_another_run(p, now):
        # the other run of the beat task read the same row, claimed it and started its job in between
        RetentionPolicy.objects.filter(pk=p.pk).update(last_run_at=now)
        return real_is_due(p, now)

    monkeypatch.setattr(policies, "is_due", due_but_claimed_by_another_run)
    monkeypatch.setattr(services, "_send_dispatch", lambda job_id: None)
    assert policies.run_due_policies() == []
    assert not ConversionJob.objects.exists()
    policy.refresh_from_db()
    assert policy.last_run_at is not None and policy.last_job_id is None


def test_an_idle_span_past_year_one_selects_nothing_instead_of_overflowing(delta_rt, migrated, pruner):
    response = _post({"kind": "prune_dry_run", "filter": {"idle_days": 1e300}, "rule": "safe_only"}, pruner)
    assert response.status_code == 400, response.content  # the filter matches no thread: nothing to prune
    assert response.json()["code"] == "no_threads" and "matches no thread" in response.json()["detail"]


def test_one_failing_policy_does_not_stop_the_next(delta_rt, migrated, monkeypatch):
    from dashboard.jobs import policies

    created = timezone.now() - dt.timedelta(minutes=5)
    RetentionPolicy.objects.create(name="a-broken", filter={"q": THREAD}, rule="safe_only", schedule="* * * * *",
                                   enabled=True, created_at=created)
    RetentionPolicy.objects.create(name="b-fine", filter={"q": THREAD}, rule="safe_only", schedule="* * * * *",
                                   enabled=True, created_at=created)
    real_run = policies.run_policy

    def run(policy, now=None):
        if policy.name == "a-broken":
            raise OverflowError("date value out of range")
        return real_run(policy, now)

    monkeypatch.setattr(policies, "run_policy", run)
    monkeypatch.setattr(services, "_send_dispatch", lambda job_id: None)
    ran = {r["policy"]: r for r in policies.run_due_policies()}
    assert ran["a-broken"]["job_id"] is None and "OverflowError" in ran["a-broken"]["error"]
    assert ran["b-fine"]["job_id"] == ConversionJob.objects.get().pk
    broken = RetentionPolicy.objects.get(name="a-broken")
    assert broken.last_run_at is not None and broken.last_error.startswith("This run failed: OverflowError")


def test_policy_id_zero_is_not_the_new_policy_form(pruner_client):
    assert pruner_client.get("/jobs/policies/0/").status_code == 404
    assert pruner_client.post("/jobs/policies/0/", {"name": "via-zero", "schedule": "0 3 * * *",
                                                    "rule": "safe_only"}).status_code == 404
    assert not RetentionPolicy.objects.exists()


def test_a_prune_without_a_dry_run_is_told_to_run_the_prune_dry_run(delta_rt, pruner):
    response = _post({"kind": "prune", "thread_ids": [THREAD], "rule": "safe_only"}, pruner)
    assert response.status_code == 400 and response.json()["code"] == "estimate_required"
    assert "A prune job needs a dry-run estimate" in response.json()["detail"]
    assert "kind prune_dry_run" in response.json()["hint"]


def test_the_preview_shows_the_chain_kept_for_a_reader_disagreement(runtime_for, sqlite_fixture_db_rw, pruner,
                                                                    pruner_client):
    """keep_last 5 on the fixture's input fork keeps the chain its kept checkpoints read through: protected
    ``reader_disagreement``, said in words on the job page, nothing rebased on it."""
    from dashboard.jobs.pruning import REASON_WORDS
    from deerflow.retention.plan import REASONS
    from tests.dashboard.jobs.conftest import shrink

    assert set(REASON_WORDS) == set(REASONS)
    thread = "delta-f10-fork-from-input"
    database = shrink(sqlite_fixture_db_rw, [thread])
    with open_saver(database):
        pass
    runtime_for(database, "delta")
    dry = run_inline(services.create_job(pruner, "prune_dry_run", {"thread_ids": [thread]},
                                         services.JobOptions(retention={"rule": "keep_last", "keep_last": 5})))
    row = dry.results.get()
    chain = [p for p in row.prune["protected"] if p["reason"] == "reader_disagreement"]
    assert len(chain) >= 5, row.prune["protected"]
    assert not {p["checkpoint_id"] for p in chain} & set(row.prune["rebased_checkpoint_ids"])
    html = pruner_client.get(f"/jobs/{dry.pk}/").content.decode()
    assert "reader disagreement: LangGraph" in html
