"""Backups of a prune: whole-thread rows (checkpoints, blobs, writes) kept, revert byte for byte, --no-backup,
purge; a live writer's new checkpoint rolls the prune back and retries it."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6

from deerflow.convert import list_backups, purge_backup
from deerflow.retention import delete_thread, keep_last, revert_prune, safe_only
from tests.deerflow.convert.support import all_rows, backup_ids, config_for, execute, open_saver, raw_rows
from tests.deerflow.retention.support import branched, ids, pending_write, read, turns


def test_revert_restores_a_keep_last_byte_for_byte(scratch_db):
    main, branch = branched(scratch_db, "t")
    pending_write(scratch_db, "t", branch[-1])
    turns(scratch_db, "other", 2)
    original, other = raw_rows(scratch_db, "t"), raw_rows(scratch_db, "other")
    report = keep_last(scratch_db, "t", 2)
    assert report.status == "pruned" and report.backup_id
    assert raw_rows(scratch_db, "t") != original
    [info] = list_backups(scratch_db, "t")
    assert info.status == "active" and info.checkpoint_rows == len(original["checkpoints"])
    reverted = revert_prune(scratch_db, report.backup_id)
    assert reverted.status == "reverted", reverted.error
    assert reverted.restored_checkpoint_ids == sorted(report.deleted_checkpoint_ids)  # what the revert put back
    assert raw_rows(scratch_db, "t") == original
    assert raw_rows(scratch_db, "other") == other
    assert [b.status for b in list_backups(scratch_db, "t")] == ["restored"]


def test_revert_restores_a_deleted_thread_byte_for_byte(scratch_db):
    turns(scratch_db, "t", 3)
    original = raw_rows(scratch_db, "t")
    report = delete_thread(scratch_db, "t")
    assert report.status == "deleted" and report.bytes_after == 0
    assert ids(scratch_db, "t") == [] and all(not rows for rows in raw_rows(scratch_db, "t").values())
    assert revert_prune(scratch_db, report.backup_id).status == "reverted"
    assert raw_rows(scratch_db, "t") == original


def test_no_backup_skips_it_and_purge_frees_the_backup_rows(scratch_db):
    turns(scratch_db, "t", 4)
    report = keep_last(scratch_db, "t", 2, backup=False)
    assert report.status == "pruned" and report.backup_id is None and backup_ids(scratch_db) == []
    turns(scratch_db, "u", 4)
    report = keep_last(scratch_db, "u", 2)
    assert execute(scratch_db, "SELECT COUNT(*) FROM dfa_backup_writes WHERE backup_id = ?",
                   (report.backup_id,))[0][0] > 0
    assert purge_backup(scratch_db, report.backup_id).status == "active"
    assert execute(scratch_db, "SELECT COUNT(*) FROM dfa_backup_writes")[0][0] == 0
    assert execute(scratch_db, "SELECT COUNT(*) FROM dfa_backup_checkpoints")[0][0] == 0
    assert revert_prune(scratch_db, report.backup_id).status == "not_found"


def test_a_dry_run_writes_nothing(scratch_db):
    branched(scratch_db, "t")
    before = all_rows(scratch_db)
    for report in (keep_last(scratch_db, "t", 2, dry_run=True), safe_only(scratch_db, "t", dry_run=True),
                   delete_thread(scratch_db, "t", dry_run=True)):
        assert report.status in ("would_prune", "would_delete"), report.error
    assert all_rows(scratch_db) == before and backup_ids(scratch_db) == []


def _append_elsewhere(db: Any) -> str:
    """A live writer: one more checkpoint on the head, through its own saver and connection."""
    with open_saver(db) as other:
        head = other.get_tuple(config_for("t"))
        checkpoint = {**head.checkpoint, "id": str(uuid6())}
        other.put(head.config, checkpoint, {**head.metadata, "step": head.metadata["step"] + 1}, {})
        return checkpoint["id"]


@pytest.mark.postgres
def test_a_live_writers_checkpoint_rolls_back_and_retries(request):
    db = request.getfixturevalue("empty_postgres_db")
    turns(db, "t", 4)
    added: list[str] = []
    report = keep_last(db, "t", 3, before_commit=lambda store: added or added.append(_append_elsewhere(db)))
    assert report.status == "pruned" and report.attempts == 2, report.error
    assert ids(db, "t")[-1] == added[0] and len(ids(db, "t")) == 3
    assert len(backup_ids(db)) == 1  # the first attempt's backup was rolled back with it
    read(db, "t")


@pytest.mark.postgres
def test_a_live_writer_with_one_attempt_changes_nothing(request):
    db = request.getfixturevalue("empty_postgres_db")
    turns(db, "t", 4)
    before = raw_rows(db, "t")
    added: list[str] = []
    report = keep_last(db, "t", 2, max_attempts=1, before_commit=lambda store: added.append(_append_elsewhere(db)))
    assert report.status == "changed_during_prune" and report.error and report.hint
    after = raw_rows(db, "t")
    assert [r for r in after["checkpoints"] if r[1] != added[0]] == before["checkpoints"]
    assert after["writes"] == before["writes"] and backup_ids(db) == []
