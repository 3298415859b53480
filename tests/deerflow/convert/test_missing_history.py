"""Missing history: pruned ancestors, snapshot rows or writes make reconstruction impossible.

The thread is blocked with a finding and nothing is written; its head value is
reported unknown (``None``), never the digest of ``[]`` as if complete.
"""

from __future__ import annotations

import pytest

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert import convert_thread, dry_run_thread
from deerflow.convert.digest import EMPTY_MESSAGES_SHA256
from tests.deerflow.convert.support import (
    agent_graph,
    all_rows,
    backup_ids,
    checkpoint_ids,
    execute,
    findings_of,
    human,
    open_saver,
    run_turn,
    stored_tuples,
)

THREAD = "pruned"


def _thread(db, turns: int = 4, snapshot_frequency: int = 10) -> None:
    with open_saver(db) as saver:
        graph = agent_graph(saver, tool_every=2, snapshot_frequency=snapshot_frequency)
        for t in range(turns):
            run_turn(graph, THREAD, human(t))


def _blocked(db, kind: str) -> list[dict]:
    before = all_rows(db)
    dry = dry_run_thread(db, THREAD)
    report = convert_thread(db, THREAD)
    for r in (dry, report):
        assert r.status == "blocked", (r.status, r.error)
        assert r.head_messages_sha256 is None and r.head_messages_sha256 != EMPTY_MESSAGES_SHA256
        assert r.error and r.hint
    assert all_rows(db) == before and backup_ids(db) == []
    found = findings_of(report, kind)
    assert found and all(f["blocking"] for f in found)
    return found


def test_pruned_ancestors_block(scratch_db):
    _thread(scratch_db)
    ids = checkpoint_ids(scratch_db, THREAD)
    # a prune that keeps only the newest checkpoints
    execute(scratch_db, "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id < ?", (THREAD, ids[5]))
    found = _blocked(scratch_db, "dangling_parent")
    assert found[0]["checkpoint_id"] == ids[5] and ids[4] in found[0]["detail"]


def test_deleted_snapshot_checkpoint_blocks(scratch_db):
    _thread(scratch_db, turns=4, snapshot_frequency=3)
    tuples = stored_tuples(scratch_db, THREAD)
    parents = {t.parent_config["configurable"]["checkpoint_id"] for t in tuples if t.parent_config}
    snapshot = next(t.config["configurable"]["checkpoint_id"] for t in reversed(tuples)
                    if isinstance(t.checkpoint["channel_values"].get("messages"), _DeltaSnapshot)
                    and t.config["configurable"]["checkpoint_id"] in parents)
    execute(scratch_db, "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?", (THREAD, snapshot))
    found = _blocked(scratch_db, "dangling_parent")
    assert any(snapshot in f["detail"] for f in found)


def test_pruned_writes_block(scratch_db):
    _thread(scratch_db, turns=3)  # 8 updates: no snapshot below the gap re-seeds the head
    assert not any(isinstance(t.checkpoint["channel_values"].get("messages"), _DeltaSnapshot)
                   for t in stored_tuples(scratch_db, THREAD))
    tuples = stored_tuples(scratch_db, THREAD)
    # a checkpoint whose messages writes feed its child: delete them (as a writes prune would)
    parent = next(t for t in reversed(tuples)
                  if t.metadata["step"] == 2 and any(w[1] == "messages" for w in t.pending_writes))
    parent_id = parent.config["configurable"]["checkpoint_id"]
    child = next(t.config["configurable"]["checkpoint_id"] for t in tuples
                 if t.parent_config and t.parent_config["configurable"]["checkpoint_id"] == parent_id)
    table = "writes" if scratch_db.backend == "sqlite" else "checkpoint_writes"
    execute(scratch_db, f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id = ?", (THREAD, parent_id))
    found = _blocked(scratch_db, "missing_writes")
    assert [f["checkpoint_id"] for f in found] == [child]
    assert parent_id in found[0]["detail"]


def test_all_writes_pruned_blocks(scratch_db):
    _thread(scratch_db, turns=2)
    table = "writes" if scratch_db.backend == "sqlite" else "checkpoint_writes"
    execute(scratch_db, f"DELETE FROM {table} WHERE thread_id = ?", (THREAD,))
    found = _blocked(scratch_db, "missing_writes")
    # the first checkpoint whose messages version moved without a write; its descendants stay unknown
    assert len(found) == 1


def test_deleted_snapshot_blob_blocks(scratch_db):
    """Postgres keeps a snapshot in ``checkpoint_blobs`` and an inline ``true`` marker in the checkpoint
    row; with the blob gone the marker is all that is left (LangGraph's reader returns ``True`` as the
    message list). Reported, never converted."""
    if scratch_db.backend != "postgres":
        pytest.skip("SQLite stores the snapshot inline in the checkpoint row")
    _thread(scratch_db, turns=4, snapshot_frequency=3)
    deleted = execute(scratch_db, "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND channel = 'messages' "
                      "AND type <> 'empty' RETURNING version", (THREAD,))
    assert deleted
    found = _blocked(scratch_db, "bad_stored_value")
    assert "blob row is missing" in found[0]["detail"]
