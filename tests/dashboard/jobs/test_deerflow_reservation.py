"""Writing jobs beside a live DeerFlow (both backends, DeerFlow's ``runs`` in the real fixture's database):
DeerFlow's ``checkpoint_write`` reservation around each thread, ``run_in_flight``, recovery of a killed
worker's reservation, and the purge of DeerFlow's Redis history cache after each committed rewrite."""

from __future__ import annotations

import datetime as dt
import sqlite3
import uuid
from collections.abc import Iterator

import psycopg
import pytest
import redis

from dashboard.jobs import compaction, pruning, reservations, services, tasks
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import run_inline
from deerflow.config.database_config import CheckpointCacheConfig
from deerflow.runtime.checkpoint_cache import checkpoint_cache_key_prefix, make_history_key
from deerflow.storage import reservation as rsv
from tests.dashboard.jobs.deerflow_support import reservation_rows
from tests.deerflow.convert.support import raw_rows
from tests.deerflow_schema import deerflow_connection, insert_run

pytestmark = pytest.mark.django_db

DELTA = "delta-f10-9t"
FULL = "full-short-3t"
OTHER = "delta-f10-10t"
DUPLICATE = (sqlite3.IntegrityError, psycopg.errors.UniqueViolation)


@pytest.fixture(autouse=True)
def _no_waits(monkeypatch):
    monkeypatch.setattr(reservations, "WAITS_S", (0.0, 0.0))


def _run(kind: str, threads: list[str], **options) -> ConversionJob:
    job = services.create_job(None, kind, {"thread_ids": threads},
                              services.JobOptions(confirmed=True, runner="inline", launched_by="test", **options))
    return run_inline(job, sleep=lambda s: None)


@pytest.mark.parametrize("kind, thread, retention", [
    ("compact", FULL, None),
    ("prune", DELTA, {"rule": "keep_last", "keep_last": 2}),
    ("prune", DELTA, {"rule": "delete_threads"}),
])
def test_a_pending_run_blocks_the_thread_and_leaves_its_rows_byte_identical(runtime_for, deerflow_db, kind, thread,
                                                                            retention, staff_client):
    runtime_for(deerflow_db, "delta")
    started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=42)
    run_id = insert_run(deerflow_db, thread, status="pending", created_at=started, owner_worker_id="gw:abc")
    before = raw_rows(deerflow_db, thread)

    job = _run(kind, [thread], retention=retention)

    [result] = job.results.all()
    assert result.status == "run_in_flight" and result.error_code == "run_in_flight"
    assert result.deerflow["run_in_flight"]["run_id"] == run_id
    assert 41 <= result.deerflow["run_in_flight"]["age_s"] < 600
    assert run_id in result.error and "Retry" in result.hint
    assert job.state == "failed"
    assert raw_rows(deerflow_db, thread) == before
    page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert f"DeerFlow run <code>{run_id}</code> (run, pending) in flight for 4" in page
    assert "DeerFlow run in flight: not touched, retry later" in page
    assert reservation_rows(deerflow_db) == []  # ours never got in; DeerFlow's run is still there
    with deerflow_connection(deerflow_db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone() in ((1,), {"count": 1})

    # DeerFlow's run finishes; the job's retry rewrites the thread and leaves no reservation behind
    with deerflow_connection(deerflow_db) as conn:
        conn.execute(f"UPDATE runs SET status = 'success' WHERE run_id = '{run_id}'")
    again = run_inline(services.retry(job, None), sleep=lambda s: None)
    [done] = again.results.all()
    assert done.status in ("compacted", "pruned", "deleted"), (done.status, done.error)
    assert done.deerflow["reservation"]["run_id"] != run_id
    assert raw_rows(deerflow_db, thread) != before
    assert reservation_rows(deerflow_db) == []


def test_while_a_job_rewrites_a_thread_deerflow_cannot_admit_a_run_on_it(runtime_for, deerflow_db, monkeypatch):
    runtime_for(deerflow_db, "delta")
    seen: dict = {}
    original = compaction.run_one

    def run_one(rt, thread_id, **kwargs):
        seen["held"] = reservation_rows(deerflow_db)
        with pytest.raises(DUPLICATE) as refused:  # DeerFlow's create_or_reject: INSERT, the index says no
            insert_run(deerflow_db, thread_id, status="pending")
        seen["refused"] = str(refused.value)
        insert_run(deerflow_db, OTHER, status="running")  # another thread is admitted meanwhile
        return original(rt, thread_id, **kwargs)

    monkeypatch.setattr(compaction, "run_one", run_one)
    job = _run("compact", [FULL])
    [result] = job.results.all()
    assert result.status == "compacted", (result.status, result.error)
    assert [(r["thread_id"], r["status"]) for r in seen["held"]] == [(FULL, "pending")]
    assert "uq_runs_thread_active" in seen["refused"] or "UNIQUE" in seen["refused"]
    assert result.deerflow["reservation"]["run_id"] == seen["held"][0]["run_id"]
    assert reservation_rows(deerflow_db) == []


def test_dry_runs_take_no_reservation(runtime_for, deerflow_db, monkeypatch):
    runtime_for(deerflow_db, "delta")
    insert_run(deerflow_db, FULL, status="running")
    insert_run(deerflow_db, DELTA, status="running")
    compact = _run("compact_dry_run", [FULL])
    prune = _run("prune_dry_run", [DELTA], retention={"rule": "keep_last", "keep_last": 2})
    assert [r.status for r in compact.results.all()] == ["needs_compaction"]
    assert [r.status for r in prune.results.all()] == ["would_prune"]
    assert [r.deerflow for r in (*compact.results.all(), *prune.results.all())] == [{}, {}]


def test_no_reservation_row_is_left_after_any_writing_job(runtime_for, deerflow_db):
    runtime_for(deerflow_db, "delta")
    compacted = _run("compact", [FULL])
    pruned = _run("prune", [DELTA], retention={"rule": "keep_last", "keep_last": 2})
    for job in (compacted, pruned):
        undo = run_inline(services.revert(job, None), sleep=lambda s: None)
        assert [r.status for r in undo.results.all()] == ["reverted"]
        assert undo.results.get().deerflow["reservation"] is not None
    assert reservation_rows(deerflow_db) == []


def test_without_deerflows_tables_jobs_run_as_before(runtime_for, small_db):
    runtime_for(small_db, "delta")
    job = _run("compact", [FULL])
    [result] = job.results.all()
    assert result.status == "compacted"
    assert result.deerflow == {"reservation": None, "cache_purge": {"type": "memory", "key_prefix": "",
                                                                     "keys_deleted": None, "error": ""}}


def test_a_killed_workers_reservation_is_released_by_the_sweep_after_its_lease(runtime_for, deerflow_db):
    runtime_for(deerflow_db, "delta")
    lease_s = 5
    now = dt.datetime.now(dt.UTC)
    dead = insert_run(deerflow_db, FULL, status="pending", operation_kind="checkpoint_write",
                      owner_worker_id=rsv.owner_id("celery@w1", pid=999999), created_at=now,
                      lease_expires_at=now + dt.timedelta(seconds=lease_s))
    assert tasks.requeue_stalled()["released"] == []  # its lease still runs: the thread stays held
    job = _run("compact", [FULL])
    assert job.results.get().status == "run_in_flight"
    # one lease later, one sweep releases it (the beat task), and DeerFlow's own rows stay
    theirs = insert_run(deerflow_db, DELTA, status="running", owner_worker_id="gw:abc",
                        lease_expires_at=now - dt.timedelta(minutes=5))
    assert rsv.release_expired(deerflow_db, now=now + dt.timedelta(seconds=lease_s + 1)) == [dead]
    assert [r.run_id for r in rsv.held_reservations(deerflow_db)] == []
    with deerflow_connection(deerflow_db) as conn:
        left = conn.execute("SELECT run_id FROM runs").fetchall()
    assert [r["run_id"] if isinstance(r, dict) else r[0] for r in left] == [theirs]
    assert run_inline(services.retry(job, None), sleep=lambda s: None).results.get().status == "compacted"


def test_the_beat_sweep_and_worker_start_up_release_expired_reservations(runtime_for, deerflow_db):
    runtime_for(deerflow_db, "delta")
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    first = insert_run(deerflow_db, FULL, status="pending", operation_kind="checkpoint_write",
                       owner_worker_id=rsv.owner_id("celery@w1", pid=1), lease_expires_at=past)
    assert tasks.requeue_stalled()["released"] == [first]
    second = insert_run(deerflow_db, FULL, status="pending", operation_kind="checkpoint_write",
                        owner_worker_id=rsv.owner_id("celery@w1", pid=2), lease_expires_at=past)
    reservations._sweep_at_start()
    assert [r.run_id for r in rsv.held_reservations(deerflow_db)] == []
    assert second not in [r["run_id"] for r in reservation_rows(deerflow_db)]


# -- the history cache -------------------------------------------------------------------------------------------
@pytest.fixture
def redis_db() -> Iterator[str]:
    """The URL of an empty Redis database claimed for this test (flushed after)."""
    from tests.integration import helpers

    db = helpers.claim_empty_redis_db("test_deerflow_reservation")
    try:
        yield helpers.redis_url(db)
    finally:
        helpers.flush_redis_db(db)


@pytest.mark.redis
def test_a_committed_rewrite_purges_the_threads_redis_cache_keys_only(runtime_for, deerflow_db, redis_db):
    database = deerflow_db.model_copy(update={"checkpoint_cache": CheckpointCacheConfig(type="redis",
                                                                                         redis_url=redis_db)})
    runtime_for(database, "delta")
    prefix = checkpoint_cache_key_prefix(database)
    client = redis.Redis.from_url(redis_db)
    keys = {t: [make_history_key(prefix, t, "", str(uuid.uuid4()), "messages") for _ in range(3)]
            for t in (FULL, DELTA, OTHER, FULL + "x")}
    for thread_keys in keys.values():
        for key in thread_keys:
            client.set(key, b"json\x00{}")
    foreign = "ckpt-hist:v1:otherdb000000:" + FULL + ":abc"  # another deployment sharing this Redis
    client.set(foreign, b"x")

    job = _run("compact", [FULL])
    [result] = job.results.all()
    assert result.status == "compacted"
    assert result.deerflow["cache_purge"] == {"type": "redis", "key_prefix": prefix, "keys_deleted": 3, "error": ""}
    assert not any(client.exists(k) for k in keys[FULL])
    assert all(client.exists(k) for t in (DELTA, OTHER, FULL + "x") for k in keys[t])
    assert client.exists(foreign)

    dry = _run("prune_dry_run", [DELTA], retention={"rule": "keep_last", "keep_last": 2})
    assert dry.results.get().deerflow == {} and all(client.exists(k) for k in keys[DELTA])
    client.close()


@pytest.mark.redis
def test_an_unreachable_redis_is_recorded_and_the_rewrite_stands(runtime_for, deerflow_db):
    database = deerflow_db.model_copy(update={"checkpoint_cache": CheckpointCacheConfig(
        type="redis", redis_url="redis://127.0.0.1:1/0")})
    runtime_for(database, "delta")
    result = _run("compact", [FULL]).results.get()
    assert result.status == "compacted"
    purge = result.deerflow["cache_purge"]
    assert purge["keys_deleted"] is None and "ConnectionError" in purge["error"]


# -- the per-run deletion cap -------------------------------------------------------------------------------------
def test_max_delete_per_run_stops_the_job_and_says_where(runtime_for, small_db, staff_client):
    runtime_for(small_db, "delta")
    threads = ["delta-f10-9t", "delta-f10-10t", "delta-f10-fork", "markerless-delta-f10-13t"]
    job = _run("prune", threads, retention={"rule": "keep_last", "keep_last": 2, "max_delete_per_run": 2})
    statuses = [r.status for r in job.results.order_by("id")]
    assert statuses == ["pruned", "pruned", "skipped", "skipped"]
    assert {r.error_code for r in job.results.filter(status="skipped")} == {"max_delete_per_run"}
    assert pruning.cap_report(job) == {"max_delete_per_run": 2, "stopped_at": 2, "skipped": 2}
    page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "at most 2 threads pruned or deleted per run; 2 so far, stopped there: 2 skipped for the next run" in page
    assert job.state == "succeeded"
    zero = _run("prune_dry_run", threads[:1], retention={"rule": "delete_threads", "max_delete_per_run": 0})
    assert [r.status for r in zero.results.all()] == ["skipped"]


@pytest.mark.parametrize("cap", [-1, "3", True, 1.5])
def test_a_bad_max_delete_per_run_is_refused(cap):
    from dashboard.errors.jobs import InvalidRetention

    with pytest.raises(InvalidRetention, match="max_delete_per_run"):
        pruning.normalize_retention({"rule": "delete_threads", "max_delete_per_run": cap})


@pytest.fixture
def pruner(django_user_model):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("pruner", password="pruner-pass", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="manage_retention"))
    return user


def test_the_api_takes_max_delete_per_run_and_refuses_a_negative_one(runtime_for, small_db, pruner):
    import json

    from django.test import Client

    from dashboard.accounts.models import ApiToken

    runtime_for(small_db, "delta")
    headers = {"Authorization": f"Bearer {ApiToken.issue(pruner)[1]}"}
    base = {"kind": "prune_dry_run", "thread_ids": [DELTA], "rule": "delete_threads"}
    bad = Client().post("/api/jobs", json.dumps({**base, "max_delete_per_run": -1}), content_type="application/json",
                        headers=headers)
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_retention"
    assert "max_delete_per_run" in bad.json()["detail"] and not ConversionJob.objects.exists()
    ok = Client().post("/api/jobs", json.dumps({**base, "max_delete_per_run": 5}), content_type="application/json",
                       headers=headers)
    assert ok.status_code == 201, ok.content
    assert ok.json()["retention"]["max_delete_per_run"] == 5
    assert ok.json()["delete_cap"] == {"max_delete_per_run": 5, "stopped_at": 0, "skipped": 0}


def test_a_policys_cap_is_saved_carried_into_its_job_and_a_negative_one_refused(runtime_for, small_db, pruner,
                                                                                monkeypatch):
    from django.test import Client

    from dashboard.jobs import policies
    from dashboard.jobs.models import RetentionPolicy

    runtime_for(small_db, "delta")
    client = Client()
    client.force_login(pruner)
    form = {"name": "capped", "schedule": "0 3 * * *", "rule": "delete_threads", "max_delete_per_run": "-3"}
    bad = client.post("/jobs/policies/new", form)
    assert bad.status_code == 400 and b"max_delete_per_run" in bad.content
    assert not RetentionPolicy.objects.exists()
    assert client.post("/jobs/policies/new", {**form, "max_delete_per_run": "25"}).status_code == 302
    policy = RetentionPolicy.objects.get()
    assert policy.max_delete_per_run == 25
    assert "at most 25 threads per run" in client.get("/jobs/policies/").content.decode()
    monkeypatch.setattr(services, "_send_dispatch", lambda job_id: None)
    policies.run_policy(policy)
    assert ConversionJob.objects.get().retention["max_delete_per_run"] == 25
