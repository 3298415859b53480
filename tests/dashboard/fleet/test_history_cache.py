"""The audit's history-cache section (dashboard.fleet.history_cache): each process's ``checkpoint_cache`` from its
heartbeat, the Redis key count of this database, and the warning about in-process memory caches."""

from __future__ import annotations

import json
import uuid

import pytest
import redis

from dashboard.fleet.facts import process_facts
from dashboard.fleet.history_cache import MEMORY_WARNING, cache_setting
from dashboard.fleet.registry import save_facts
from deerflow.config.database_config import CheckpointCacheConfig
from deerflow.runtime.checkpoint_cache import checkpoint_cache_key_prefix, make_history_key

pytestmark = pytest.mark.django_db

REDIS = "redis://:s3cret@127.0.0.1:6379/12"


def test_a_heartbeat_carries_the_cache_setting_without_the_password(runtime_for, sqlite_fixture_db):
    database = sqlite_fixture_db.model_copy(update={"checkpoint_cache": CheckpointCacheConfig(
        type="redis", redis_url=REDIS, ttl_seconds=600)})
    rt = runtime_for(database, "delta")
    facts = process_facts(rt, role="worker")
    assert facts["checkpoint_cache"] == {"type": "redis", "max_entries": 128, "ttl_seconds": 600,
                                         "key_prefix": checkpoint_cache_key_prefix(database),
                                         "redis": "127.0.0.1:6379/12"}
    assert "s3cret" not in json.dumps(facts)
    record = save_facts("w-1", facts)
    assert record.checkpoint_cache["type"] == "redis"
    disabled = database.model_copy(update={"checkpoint_cache": CheckpointCacheConfig(max_entries=0)})
    assert cache_setting(disabled)["type"] == "disabled"


@pytest.mark.redis
def test_the_audit_counts_this_databases_redis_keys(runtime_for, sqlite_fixture_db, staff_client, process_row):
    from tests.integration import helpers

    db = helpers.claim_empty_redis_db("test_history_cache")
    url = helpers.redis_url(db)
    client = redis.Redis.from_url(url)
    try:
        database = sqlite_fixture_db.model_copy(update={"checkpoint_cache": CheckpointCacheConfig(
            type="redis", redis_url=url)})
        runtime_for(database, "delta")
        prefix = checkpoint_cache_key_prefix(database)
        for i in range(7):
            client.set(make_history_key(prefix, f"t{i % 3}", "", str(uuid.uuid4()), "messages"), b"x")
        client.set("ckpt-hist:v1:0123456789ab:t0:x", b"another deployment")
        process_row("worker", checkpoint_cache={"type": "memory", "max_entries": 128, "ttl_seconds": 86400,
                                                "key_prefix": prefix, "redis": ""})
        body = staff_client.get("/api/audit").json()["history_cache"]
        assert body["setting"]["type"] == "redis" and body["redis_keys"] == 7 and body["error"] == ""
        assert body["memory_processes"] and body["warning"] == MEMORY_WARNING
        page = staff_client.get("/audit/").content.decode()
        assert 'id="history-cache-keys" class="num">7<' in page
        assert "restarts" in page and 'class="history-cache">memory' in page
    finally:
        client.close()
        helpers.flush_redis_db(db)


def test_a_memory_cache_is_warned_about_and_an_unreachable_redis_is_said(runtime_for, sqlite_fixture_db,
                                                                          staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    body = staff_client.get("/api/audit").json()["history_cache"]
    assert body["setting"]["type"] == "memory" and body["redis_keys"] is None
    assert body["warning"] == MEMORY_WARNING
    down = sqlite_fixture_db.model_copy(update={"checkpoint_cache": CheckpointCacheConfig(
        type="redis", redis_url="redis://127.0.0.1:1/0")})
    runtime_for(down, "delta")
    body = staff_client.get("/api/audit").json()["history_cache"]
    assert body["redis_keys"] is None and "ConnectionError" in body["error"] and body["warning"] == ""
    assert staff_client.get("/audit/").status_code == 200


def test_an_outside_process_reports_its_cache_and_a_bad_one_is_refused(runtime_for, sqlite_fixture_db,
                                                                        django_user_model):
    from django.contrib.auth.models import Permission
    from django.test import Client

    from dashboard.accounts.models import ApiToken
    from dashboard.fleet.models import ProcessRecord

    runtime_for(sqlite_fixture_db, "delta")
    user = django_user_model.objects.create_user("gateway", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="report_heartbeat"))
    token = ApiToken.issue(user)[1]
    body = {"instance_id": "a" * 32, "host": "gw-1", "pid": 7, "mode": "delta", "snapshot_frequency": 10,
            "checkpoint_cache": {"type": "memory", "max_entries": 128}}

    def post(payload):
        return Client().post("/api/processes/heartbeat", json.dumps(payload), content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")

    bad = post({**body, "checkpoint_cache": {"type": "disk"}})
    assert bad.status_code == 400 and "checkpoint_cache" in bad.content.decode()
    assert post(body).status_code in (200, 201)
    assert ProcessRecord.objects.get(host="gw-1").checkpoint_cache["type"] == "memory"
    audit = Client()
    audit.force_login(user)
    h = audit.get("/api/audit").json()["history_cache"]
    assert any("gw-1" in name for name in h["memory_processes"]) and h["warning"] == MEMORY_WARNING
