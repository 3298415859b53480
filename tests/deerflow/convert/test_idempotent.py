"""Idempotence: a converted thread converts again as ``already_full`` and stays byte-identical; a
full-mode thread is never rewritten."""

from __future__ import annotations

from deerflow.convert import convert_thread, dry_run_thread, list_backups
from tests.deerflow.convert.support import (
    agent_graph,
    backup_ids,
    convert_and_compare,
    human,
    open_saver,
    raw_rows,
    run_turn,
)


def test_second_conversion_is_already_full_and_byte_identical(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, snapshot_frequency=3, tool_every=2)
        for t in range(5):
            run_turn(graph, "twice", human(t))
    first = convert_and_compare(scratch_db, "twice")
    rows = raw_rows(scratch_db, "twice")
    backups = backup_ids(scratch_db)
    assert backups == [first.backup_id]

    dry = dry_run_thread(scratch_db, "twice")
    assert dry.status == "already_full" and dry.checkpoints_to_rewrite == 0
    assert dry.bytes_after == dry.bytes_before == first.bytes_after
    second = convert_thread(scratch_db, "twice")
    assert second.status == "already_full"
    assert second.checkpoints_to_rewrite == 0 and second.backup_id is None and second.attempts == 1
    assert second.head_messages_sha256 == first.head_messages_sha256
    assert raw_rows(scratch_db, "twice") == rows
    assert backup_ids(scratch_db) == backups
    assert [b.status for b in list_backups(scratch_db, "twice")] == ["active"]


def test_full_mode_thread_is_never_rewritten(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, mode="full", tool_every=2)
        for t in range(3):
            run_turn(graph, "full", human(t), mode="full")
    rows = raw_rows(scratch_db, "full")
    report = convert_thread(scratch_db, "full")
    assert report.status == "already_full" and report.checkpoints_to_rewrite == 0
    assert report.bytes_after == report.bytes_before > 0
    assert raw_rows(scratch_db, "full") == rows
    assert backup_ids(scratch_db) == []


def test_unknown_thread_is_not_found(scratch_db):
    with open_saver(scratch_db):
        pass
    for report in (dry_run_thread(scratch_db, "nope"), convert_thread(scratch_db, "nope")):
        assert report.status == "not_found" and "nope" in report.error and report.hint
