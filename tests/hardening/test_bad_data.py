"""Damaged stored data: each case answers a clear error naming what is damaged, shows nothing partial, writes nothing.

Every case damages a private copy of the real fixture by hand (that is the
fault being injected), then browses it through the pages and the API:

* a checkpoint blob, a pending write or a Postgres channel blob that does not
  decode: 422 ``checkpoint_undecodable`` naming the thread, the checkpoint and
  the part, instead of the decoder's bare ``ValueError``;
* a delta thread whose snapshot ancestors were pruned, a dangling
  ``parent_checkpoint_id``, a parent cycle, a parent link cleared mid-thread: the state answers 422
  ``history_incomplete`` naming the break, and the history marks every
  checkpoint that cannot be reconstructed instead of showing the messages
  after the break as the whole conversation.

Browsing writes nothing: every stored row is digested before and after.
The lineage check has no false positives: every checkpoint of the real
fixture, on both backends, has a whole replay chain.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import psycopg
import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.reader.lineage import find_lineage_gap
from deerflow.storage.savers import open_checkpointer
from deerflow.storage.sqlread import reader_for
from tests.backends import BACKENDS
from tests.dashboard.html import parse

THREAD = "delta-f10-9t"  # 27 root checkpoints, one snapshot at step 13


def db_file(database: DatabaseConfig) -> Path:
    return Path(database.sqlite_dir) / "deerflow.db"


#: LangGraph's original columns (the saver's ``setup()`` migrates an old file: WAL, ``writes.task_path``).
STORED = {"checkpoints": "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata",
          "writes": "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value"}


def sha(path: Path) -> str:
    """Digest of every stored checkpoint and write."""
    digest = hashlib.sha256()
    with sqlite3.connect(path) as conn:
        for table, columns in STORED.items():
            for row in conn.execute(f"SELECT {columns} FROM {table} ORDER BY 1, 2, 3, 4, 5"):
                digest.update(repr(row).encode())
    return digest.hexdigest()


def root_ids(database: DatabaseConfig, thread_id: str = THREAD) -> list[str]:
    """Root-namespace checkpoint ids, oldest first."""
    with sqlite3.connect(db_file(database)) as conn:
        return [r[0] for r in conn.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND "
                                           "checkpoint_ns = '' ORDER BY checkpoint_id", (thread_id,))]


def damage(database: DatabaseConfig, sql: str, params: tuple) -> None:
    with sqlite3.connect(db_file(database)) as conn:
        assert conn.execute(sql, params).rowcount >= 1


def error_card(response) -> str:
    body = response.content.decode()
    assert "Traceback" not in body
    (card,) = parse(body).find_all("section", cls="error-card")
    return card.text


def history_counts(client, thread_id: str = THREAD) -> dict[str, int | None]:
    rows = client.get(f"/api/threads/{thread_id}/history?limit=500").json()["checkpoints"]
    return {r["checkpoint_id"]: r["message_count"] for r in rows}


# -- undecodable blobs ---------------------------------------------------------
@pytest.mark.parametrize("garbage", [b"\xc1\xff garbage \x00\x01", b"\x01"], ids=["not-msgpack", "not-a-checkpoint"])
def test_undecodable_checkpoint_blob(sqlite_fixture_db_rw, runtime_for, staff_client, garbage):
    damaged = root_ids(sqlite_fixture_db_rw)[-4]  # after the snapshot: the head replays through it
    damage(sqlite_fixture_db_rw, "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
           (garbage, THREAD, damaged))
    runtime_for(sqlite_fixture_db_rw, "delta")
    before = sha(db_file(sqlite_fixture_db_rw))

    for url in (f"/api/threads/{THREAD}/state", f"/api/threads/{THREAD}/history",
                f"/api/threads/{THREAD}/state?checkpoint_id={damaged}"):
        response = staff_client.get(url)
        assert response.status_code == 422, (url, response.content[:300])
        body = response.json()
        assert body["code"] == "checkpoint_undecodable"
        assert f"Thread '{THREAD}': checkpoint '{damaged}'" in body["detail"]
        assert "the stored checkpoint cannot be decoded" in body["detail"]
        assert "backup" in body["hint"]
    for url in (f"/threads/{THREAD}/", f"/history/{THREAD}/", f"/thread/?thread_id={THREAD}"):
        response = staff_client.get(url)
        assert response.status_code == 422, url
        assert damaged in error_card(response)
    assert staff_client.get("/api/threads").status_code == 200  # the list reads metadata only
    assert sha(db_file(sqlite_fixture_db_rw)) == before


def test_undecodable_pending_write(sqlite_fixture_db_rw, runtime_for, staff_client):
    with sqlite3.connect(db_file(sqlite_fixture_db_rw)) as conn:
        cid, task, idx, channel = conn.execute(
            "SELECT checkpoint_id, task_id, idx, channel FROM writes WHERE thread_id = ? AND channel = 'messages' "
            "ORDER BY checkpoint_id DESC LIMIT 1", (THREAD,)).fetchone()
        conn.execute("UPDATE writes SET value = ? "
                     "WHERE thread_id = ? AND checkpoint_id = ? AND task_id = ? AND idx = ?",
                     (b"\xc1\xc1\xc1", THREAD, cid, task, idx))
    runtime_for(sqlite_fixture_db_rw, "delta")
    body = staff_client.get(f"/api/threads/{THREAD}/state").json()
    assert body["code"] == "checkpoint_undecodable"
    assert f"checkpoint '{cid}'" in body["detail"] and f"the stored write {channel} (task {task}" in body["detail"]


@pytest.mark.postgres
def test_undecodable_postgres_channel_blob(postgres_fixture_db_rw, runtime_for, staff_client):
    with psycopg.connect(postgres_fixture_db_rw.postgres_url, autocommit=True) as conn:
        version, first = conn.execute(
            """SELECT b.version, (SELECT MIN(c.checkpoint_id) FROM checkpoints c WHERE c.thread_id = b.thread_id
                      AND c.checkpoint_ns = '' AND c.checkpoint -> 'channel_versions' ->> 'messages' = b.version)
               FROM checkpoint_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = '' AND b.channel = 'messages'
                AND b.type <> 'empty' ORDER BY b.version DESC LIMIT 1""", (THREAD,)).fetchone()
        conn.execute("UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = %s AND checkpoint_ns = '' "
                     "AND channel = 'messages' AND version = %s", (b"\xc1\xc1", THREAD, version))
    runtime_for(postgres_fixture_db_rw, "delta")
    response = staff_client.get(f"/api/threads/{THREAD}/state")
    assert response.status_code == 422, response.content[:300]
    body = response.json()
    assert f"checkpoint '{first}'" in body["detail"]
    assert f"the stored channel messages version {version} cannot be decoded" in body["detail"]


def test_a_sound_thread_next_to_a_damaged_one_still_opens(sqlite_fixture_db_rw, runtime_for, staff_client):
    damage(sqlite_fixture_db_rw, "UPDATE checkpoints SET checkpoint = x'c1' WHERE thread_id = ?", (THREAD,))
    runtime_for(sqlite_fixture_db_rw, "delta")
    assert staff_client.get("/api/threads/delta-f10-fork/state").status_code == 200


# -- broken replay chains --------------------------------------------------------
def test_pruned_snapshot_ancestors(sqlite_fixture_db_rw, runtime_for, staff_client):
    """Keep the newest three checkpoints only: the snapshot they replay from is gone."""
    ids = root_ids(sqlite_fixture_db_rw)
    for table in ("checkpoints", "writes"):
        damage(sqlite_fixture_db_rw, f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id < ?",
               (THREAD, ids[-3]))
    runtime_for(sqlite_fixture_db_rw, "delta")
    before = sha(db_file(sqlite_fixture_db_rw))

    response = staff_client.get(f"/api/threads/{THREAD}/state")
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "history_incomplete"
    assert f"the messages of checkpoint '{ids[-1]}' cannot be reconstructed" in body["detail"]
    assert f"names parent '{ids[-4]}', which is not stored" in body["detail"]
    assert "values" not in body  # no partial messages
    page = staff_client.get(f"/threads/{THREAD}/")
    assert page.status_code == 422 and 'id="messages"' not in page.content.decode()
    assert "cannot be reconstructed" in error_card(page)
    assert set(history_counts(staff_client).values()) == {None}
    assert "cannot be reconstructed" in staff_client.get(f"/history/{THREAD}/").content.decode()
    assert sha(db_file(sqlite_fixture_db_rw)) == before


def test_pruning_that_keeps_the_snapshot_still_reads(sqlite_fixture_db_rw, runtime_for, staff_client, manifest):
    """Delete what precedes the snapshot: everything from the snapshot on reconstructs; older rows are marked."""
    ids = root_ids(sqlite_fixture_db_rw)
    snapshot = ids[14]  # step 13
    for table in ("checkpoints", "writes"):
        damage(sqlite_fixture_db_rw, f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id < ?",
               (THREAD, ids[10]))
    runtime_for(sqlite_fixture_db_rw, "delta")
    state = staff_client.get(f"/api/threads/{THREAD}/state").json()
    assert len(state["values"]["messages"]) == 18  # the whole conversation, as before pruning
    counts = history_counts(staff_client)
    assert all(counts[c] is not None for c in ids if c >= snapshot)
    assert all(counts[c] is None for c in ids[10:14])


def test_dangling_parent(sqlite_fixture_db_rw, runtime_for, staff_client):
    ids = root_ids(sqlite_fixture_db_rw)
    ghost = "1f000000-0000-6000-8000-000000000000"
    damage(sqlite_fixture_db_rw, "UPDATE checkpoints SET parent_checkpoint_id = ? WHERE thread_id = ? AND "
           "checkpoint_id = ?", (ghost, THREAD, ids[-5]))
    runtime_for(sqlite_fixture_db_rw, "delta")
    body = staff_client.get(f"/api/threads/{THREAD}/state").json()
    assert body["code"] == "history_incomplete"
    assert f"checkpoint '{ids[-5]}' names parent '{ghost}', which is not stored" in body["detail"]
    counts = history_counts(staff_client)
    assert [counts[c] for c in ids[-5:]] == [None] * 5
    assert all(counts[c] is not None for c in ids[:-5])


def test_parent_cycle(sqlite_fixture_db_rw, runtime_for, staff_client):
    ids = root_ids(sqlite_fixture_db_rw)
    damage(sqlite_fixture_db_rw, "UPDATE checkpoints SET parent_checkpoint_id = ? WHERE thread_id = ? AND "
           "checkpoint_id = ?", (ids[-3], THREAD, ids[-5]))
    runtime_for(sqlite_fixture_db_rw, "delta")
    response = staff_client.get(f"/api/threads/{THREAD}/state")
    assert response.status_code == 422
    assert "the parent chain loops" in response.json()["detail"]
    assert staff_client.get(f"/threads/{THREAD}/").status_code == 422


def test_cleared_parent_link_mid_thread(sqlite_fixture_db_rw, runtime_for, staff_client):
    ids = root_ids(sqlite_fixture_db_rw)
    damage(sqlite_fixture_db_rw, "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? AND "
           "checkpoint_id = ?", (THREAD, ids[-5]))
    runtime_for(sqlite_fixture_db_rw, "delta")
    body = staff_client.get(f"/api/threads/{THREAD}/state").json()
    assert body["code"] == "history_incomplete"
    assert f"checkpoint '{ids[-5]}' has no parent but is not the first checkpoint" in body["detail"]


def test_full_mode_refuses_the_damaged_delta_thread_with_409_first(sqlite_fixture_db_rw, runtime_for, staff_client):
    ids = root_ids(sqlite_fixture_db_rw)
    damage(sqlite_fixture_db_rw, "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id < ?", (THREAD, ids[-3]))
    runtime_for(sqlite_fixture_db_rw, "full")
    assert staff_client.get(f"/api/threads/{THREAD}/state").status_code == 409


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_checkpoint_of_the_real_fixture_has_a_gap(backend, request):
    """No false positives: every checkpoint of every thread, every namespace, replays whole."""
    database = request.getfixturevalue(f"{backend}_fixture_db")
    with open_checkpointer(database) as saver:
        rows = [(r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"]) for r in reader_for(saver).query(
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints")]
        assert len(rows) > 3000
        gaps = [g for t, ns, c in rows if (g := find_lineage_gap(saver, t, ns, c)) is not None]
    assert gaps == []
