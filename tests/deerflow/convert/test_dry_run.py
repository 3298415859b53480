"""Dry run on the real fixture: statuses, what would be rewritten, bytes now and after (estimate), nothing
written; the estimate is checked against the bytes a real conversion leaves."""

from __future__ import annotations

from typing import Any

import pytest

from deerflow.convert import convert_thread, dry_run_thread
from tests.deerflow.convert.support import all_rows, execute

ALREADY_FULL = {"full", "empty"}
FORKED = {"delta-f10-fork", "delta-f10-fork-from-input", "full-rollback"}


def expected_rewrites(checkpoints: list[dict[str, Any]]) -> int:
    """Checkpoints the manifest says carry delta storage: the DeerFlow marker, LangGraph's ``messages``
    counter, or a stored value that is not a plain list although the checkpoint has messages. (An empty
    root checkpoint that never had a ``messages`` value has nothing to rewrite: a full-mode reader
    already reads ``[]`` there.)"""
    return sum(1 for c in checkpoints
               if c["delta_marker"] or "messages" in (c["counters_since_delta_snapshot"] or {})
               or (c["messages_stored"] != "plain" and c["message_count"] > 0))


def _full(thread: dict[str, Any]) -> bool:
    return thread["category"] in ALREADY_FULL or thread["write_mode"] == "full"


@pytest.mark.slow
def test_dry_run_of_every_fixture_thread(fixture_db, manifest):
    backend = fixture_db.backend
    before = all_rows(fixture_db)
    for thread in manifest["threads"]:
        thread_id = thread["thread_id"]
        facts = thread["backends"][backend]
        report = dry_run_thread(fixture_db, thread_id, integrity=False)
        where = f"{backend} {thread_id}"
        assert report.status == ("already_full" if _full(thread) else "needs_conversion"), where
        assert report.checkpoints_total == facts["checkpoint_count"], where
        assert report.checkpoints_to_rewrite == expected_rewrites(facts["checkpoints"]), where
        assert report.bytes_before > 0, where
        if _full(thread):
            assert report.checkpoints_to_rewrite == 0 and report.bytes_after == report.bytes_before, where
        else:
            # full storage re-stores the whole list at every version
            assert report.checkpoints_to_rewrite > 0 and report.bytes_after > report.bytes_before, where
        assert report.head_messages_sha256 == facts["head"]["messages_sha256"], where
        assert report.error is None and report.first_difference is None and report.backup_id is None, where
        assert not [f for f in report.findings if f["blocking"]], where
        kinds = {f["kind"] for f in report.findings}
        assert ("branch_point" in kinds) == (thread_id in FORKED), where
        # the SQLite fixture's writer stored no task_path: its parallel tool writes are order-unknown
        assert ("order_unknown" in kinds) == (backend == "sqlite" and thread_id == "delta-f10-fanout"), where
    assert all_rows(fixture_db) == before


SAMPLE = ["delta-f10-1t", "delta-f10-50t", "delta-f3-40t", "migrated-full20-delta20", "delta-f10-subgraph",
          "delta-f10-fork-from-input", "markerless-delta-f10-13t", "delta-f10-untrusted-content"]


def _measured_bytes(db, thread_id: str) -> int:
    if db.backend == "sqlite":
        return (execute(db, "SELECT SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints WHERE thread_id = ?",
                        (thread_id,))[0][0]
                + (execute(db, "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?",
                           (thread_id,))[0][0]))
    return sum(execute(db, query, (thread_id,))[0][0] for query in (
        "SELECT SUM(pg_column_size(checkpoint) + pg_column_size(metadata)) FROM checkpoints WHERE thread_id = ?",
        "SELECT COALESCE(SUM(COALESCE(length(blob), 0)), 0) FROM checkpoint_blobs WHERE thread_id = ?",
        "SELECT COALESCE(SUM(COALESCE(length(blob), 0)), 0) FROM checkpoint_writes WHERE thread_id = ?"))


def test_bytes_estimate_is_within_ten_percent_of_the_real_size(fixture_db, manifest):
    threads = {t["thread_id"]: t for t in manifest["threads"]}
    for thread_id in SAMPLE:
        bytes_now = _measured_bytes(fixture_db, thread_id)
        dry = dry_run_thread(fixture_db, thread_id, integrity=False)
        assert dry.bytes_before == bytes_now
        report = convert_thread(fixture_db, thread_id, integrity=False)
        assert report.status == "converted"
        assert report.checkpoints_to_rewrite == dry.checkpoints_to_rewrite == expected_rewrites(
            threads[thread_id]["backends"][fixture_db.backend]["checkpoints"])
        real = _measured_bytes(fixture_db, thread_id)
        assert report.bytes_before == bytes_now and report.bytes_after == real
        assert abs(dry.bytes_after - real) <= 0.10 * real, (thread_id, dry.bytes_after, real)
