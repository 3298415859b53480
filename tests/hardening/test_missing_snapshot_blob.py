"""A Postgres snapshot blob deleted under a delta checkpoint: 422 naming it, never a crash or fake messages."""

import psycopg
import pytest

from tests import fixtures_real


@pytest.mark.postgres
@pytest.mark.django_db
def test_missing_snapshot_blob_answers_422(postgres_fixture_db_rw, runtime_for, staff_client):
    thread = fixtures_real.manifest_threads()["delta-f10-10t"]
    snap = next(c for c in thread["backends"]["postgres"]["checkpoints"] if c["messages_stored"] == "delta_snapshot")
    with psycopg.connect(postgres_fixture_db_rw.postgres_url, autocommit=True) as conn:
        version = conn.execute(
            "SELECT checkpoint -> 'channel_versions' ->> 'messages' FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s",
            ("delta-f10-10t", snap["checkpoint_id"])).fetchone()[0]
        deleted = conn.execute(
            "DELETE FROM checkpoint_blobs WHERE thread_id = %s AND channel = 'messages' AND version = %s",
            ("delta-f10-10t", version)).rowcount
    assert deleted == 1
    runtime_for(postgres_fixture_db_rw, "delta")
    response = staff_client.get("/api/threads/delta-f10-10t/state", {"checkpoint_id": snap["checkpoint_id"]})
    assert response.status_code == 422, response.content[:300]
    body = response.json()
    assert snap["checkpoint_id"] in body["detail"]
    assert body["hint"]
