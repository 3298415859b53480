"""Backups: listed with size and status, purged, and reverted byte-identically (verified)."""

from __future__ import annotations

import datetime as dt

import pytest

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert import (
    BackupNotFoundError,
    convert_thread,
    list_backups,
    purge_backup,
    revert_thread,
)
from tests.deerflow.convert.support import (
    agent_graph,
    execute,
    human,
    messages_at,
    open_saver,
    raw_rows,
    readings,
    run_turn,
    stored_tuples,
)


def _threads(db, *names: str) -> None:
    with open_saver(db) as saver:
        graph = agent_graph(saver, snapshot_frequency=3, tool_every=2)
        for name in names:
            for t in range(4):
                run_turn(graph, name, human(t))


def _original_size(db, thread_id: str) -> tuple[int, int, int]:
    """(checkpoint rows, messages blob rows, bytes) a backup of the thread must record."""
    if db.backend == "sqlite":
        n, size = execute(db, "SELECT count(*), SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints "
                          "WHERE thread_id = ?", (thread_id,))[0]
        return n, 0, size
    n, size = execute(db, "SELECT count(*), SUM(pg_column_size(checkpoint) + pg_column_size(metadata)) "
                      "FROM checkpoints WHERE thread_id = ?", (thread_id,))[0]
    blobs, blob_size = execute(db, "SELECT count(*), COALESCE(SUM(COALESCE(length(blob), 0)), 0) FROM checkpoint_blobs "
                               "WHERE thread_id = ? AND channel = 'messages'", (thread_id,))[0]
    return n, blobs, size + blob_size


def _backup_row_counts(db, backup_id: str) -> int:
    n = execute(db, "SELECT count(*) FROM dfa_backup_checkpoints WHERE backup_id = ?", (backup_id,))[0][0]
    if db.backend == "postgres":
        n += execute(db, "SELECT count(*) FROM dfa_backup_blobs WHERE backup_id = ?", (backup_id,))[0][0]
    return n


def test_list_purge_and_revert_statuses(scratch_db):
    _threads(scratch_db, "one", "two")
    sizes = {t: _original_size(scratch_db, t) for t in ("one", "two")}
    one = convert_thread(scratch_db, "one", note="job 17")
    two = convert_thread(scratch_db, "two")
    assert one.status == two.status == "converted"

    listed = list_backups(scratch_db)
    assert [b.backup_id for b in listed] == [two.backup_id, one.backup_id]  # newest first
    by_id = {b.backup_id: b for b in listed}
    for report, thread_id, note in ((one, "one", "job 17"), (two, "two", "")):
        info = by_id[report.backup_id]
        assert (info.thread_id, info.status, info.note) == (thread_id, "active", note)
        assert (info.checkpoint_rows, info.blob_rows, info.bytes) == sizes[thread_id]
        assert info.bytes > 0 and dt.datetime.fromisoformat(info.created_at)
        assert info.as_dict()["backup_id"] == report.backup_id
    assert [b.backup_id for b in list_backups(scratch_db, "one")] == [one.backup_id]
    assert list_backups(scratch_db, "nobody") == []

    converted = raw_rows(scratch_db, "one")
    purged = purge_backup(scratch_db, one.backup_id)
    assert purged.backup_id == one.backup_id and purged.status == "active"  # the record as it was
    assert _backup_row_counts(scratch_db, one.backup_id) == 0
    assert ({b.backup_id: b.status for b in list_backups(scratch_db)}
            == {one.backup_id: "purged", two.backup_id: "active"})
    assert raw_rows(scratch_db, "one") == converted  # purging never touches the thread

    for backup_id in (one.backup_id, "no-such-backup"):
        report = revert_thread(scratch_db, backup_id)
        assert report.status == "not_found" and report.error and report.hint
    assert raw_rows(scratch_db, "one") == converted
    with pytest.raises(BackupNotFoundError):
        purge_backup(scratch_db, "no-such-backup")


def test_revert_restores_rows_byte_identically(scratch_db):
    _threads(scratch_db, "rv")
    original = raw_rows(scratch_db, "rv")
    delta = readings(scratch_db, "rv", "delta")
    report = convert_thread(scratch_db, "rv")
    assert report.status == "converted"
    assert raw_rows(scratch_db, "rv") != original

    reverted = revert_thread(scratch_db, report.backup_id)

    assert reverted.status == "reverted" and reverted.thread_id == "rv" and reverted.backup_id == report.backup_id
    assert raw_rows(scratch_db, "rv") == original
    assert readings(scratch_db, "rv", "delta") == delta
    assert [b.status for b in list_backups(scratch_db, "rv")] == ["restored"]
    again = revert_thread(scratch_db, report.backup_id)
    assert again.status == "not_found"
    assert raw_rows(scratch_db, "rv") == original
    # the reverted thread converts again
    assert convert_thread(scratch_db, "rv").status == "converted"


def test_revert_keeps_checkpoints_written_after_the_conversion(scratch_db):
    _threads(scratch_db, "later")
    original = raw_rows(scratch_db, "later")
    report = convert_thread(scratch_db, "later")
    with open_saver(scratch_db) as saver:
        run_turn(agent_graph(saver, mode="full"), "later", human(9), mode="full")
    newest = messages_at(scratch_db, "later", mode="full")
    new_ids = {t.config["configurable"]["checkpoint_id"] for t in stored_tuples(scratch_db, "later")} - {
        r[1] for r in original["checkpoints"]}
    assert new_ids

    assert revert_thread(scratch_db, report.backup_id).status == "reverted"

    after = raw_rows(scratch_db, "later")
    assert [r for r in after["checkpoints"] if r[1] not in new_ids] == original["checkpoints"]
    assert {r[1] for r in after["checkpoints"]} >= new_ids
    # the newer checkpoints still read what they read before the revert
    assert [m.id for m in messages_at(scratch_db, "later", mode="delta")] == [m.id for m in newest]


def test_revert_of_a_tampered_backup_fails_verification_and_changes_nothing(scratch_db):
    _threads(scratch_db, "tamper")
    report = convert_thread(scratch_db, "tamper")
    converted = raw_rows(scratch_db, "tamper")
    with open_saver(scratch_db) as saver:
        serde = saver.serde
    # drop the last message from one backed-up snapshot
    if scratch_db.backend == "sqlite":
        rows = execute(scratch_db, "SELECT checkpoint_id, type, checkpoint FROM dfa_backup_checkpoints "
                       "WHERE backup_id = ?", (report.backup_id,))
        for cid, type_, blob in rows:
            checkpoint = serde.loads_typed((type_, blob))
            snapshot = checkpoint["channel_values"].get("messages")
            if isinstance(snapshot, _DeltaSnapshot):
                checkpoint["channel_values"]["messages"] = _DeltaSnapshot(snapshot.value[:-1])
                execute(scratch_db, "UPDATE dfa_backup_checkpoints SET checkpoint = ? "
                        "WHERE backup_id = ? AND checkpoint_id = ?",
                        (serde.dumps_typed(checkpoint)[1], report.backup_id, cid))
                break
    else:
        rows = execute(scratch_db, "SELECT version, type, blob FROM dfa_backup_blobs WHERE backup_id = ? "
                       "AND channel = 'messages' AND type <> 'empty'", (report.backup_id,))
        version, type_, blob = rows[0]
        snapshot = serde.loads_typed((type_, blob))
        execute(scratch_db, "UPDATE dfa_backup_blobs SET blob = ? WHERE backup_id = ? AND version = ?",
                (serde.dumps_typed(_DeltaSnapshot(snapshot.value[:-1]))[1], report.backup_id, version))

    reverted = revert_thread(scratch_db, report.backup_id)

    assert reverted.status == "verification_failed", reverted
    diff = reverted.first_difference
    assert diff["converted_sha256"] != diff["restored_sha256"] and diff["checkpoint_id"]
    assert raw_rows(scratch_db, "tamper") == converted
    assert [b.status for b in list_backups(scratch_db, "tamper")] == ["active"]


def test_a_backup_that_moves_blobs_holds_the_same_rows_and_deletes_only_those(scratch_db):
    if scratch_db.backend != "postgres":
        pytest.skip("moving blobs into the backup is Postgres only (SQLite has no blob table)")
    from deerflow.convert.backups import copy_to_backup
    from deerflow.storage.sessions import open_session

    with open_saver(scratch_db) as saver:  # full mode: every checkpoint's messages list is its own blob
        graph = agent_graph(saver, mode="full", tool_every=2)
        for t in range(4):
            run_turn(graph, "moved", human(t))
    versions = [r[0] for r in execute(scratch_db, "SELECT version FROM checkpoint_blobs WHERE thread_id = ? "
                                      "AND channel = 'messages' ORDER BY version", ("moved",))]
    moved, kept = versions[::2], versions[1::2]
    assert moved and kept
    before = raw_rows(scratch_db, "moved")
    with open_session(scratch_db) as session:
        plain = copy_to_backup(session, "plain", "moved")
        session.commit()
    with open_session(scratch_db) as session:
        with pytest.raises(ValueError, match="not with whole_thread"):
            copy_to_backup(session, "refused", "moved", whole_thread=True, move_messages=("", moved))
    with open_session(scratch_db) as session:
        info = copy_to_backup(session, "moving", "moved", move_messages=("", moved))
        session.commit()
    assert (info.checkpoint_rows, info.blob_rows, info.bytes) == (plain.checkpoint_rows, plain.blob_rows, plain.bytes)
    assert info.blob_rows == len(versions)

    def backed_up(backup_id: str) -> list[tuple]:
        return execute(scratch_db, "SELECT checkpoint_ns, channel, version, type, blob FROM dfa_backup_blobs "
                       "WHERE backup_id = ? ORDER BY 1, 2, 3", (backup_id,))

    assert backed_up("moving") == backed_up("plain") == [r for r in before["blobs"] if r[1] == "messages"]
    after = raw_rows(scratch_db, "moved")
    assert [r for r in after["blobs"] if r[1] == "messages"] == [
        r for r in before["blobs"] if r[1] == "messages" and r[2] in kept]
    assert [r for r in after["blobs"] if r[1] != "messages"] == [r for r in before["blobs"] if r[1] != "messages"]
    assert after["checkpoints"] == before["checkpoints"] and after["writes"] == before["writes"]
