"""Compaction's failure paths: nothing is written, and the report says what and what to do."""

from __future__ import annotations

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import compact_plan, compact_writer, compactor, integrity
from deerflow.convert.compactor import compact_thread, dry_run_compact
from deerflow.convert.langgraph_rule import LangGraphRule, RuleRead, sample_points
from tests.deerflow.convert.support import (
    agent_graph,
    backup_ids,
    checkpoint_ids,
    human,
    open_saver,
    raw_rows,
    run_turn,
)


def _full_thread(db, thread_id: str = "t", turns: int = 8) -> None:
    with open_saver(db) as saver:
        graph = agent_graph(saver, mode="full", tool_every=2)
        for t in range(turns):
            run_turn(graph, thread_id, human(t), mode="full")


def test_a_wrong_rewrite_is_caught_by_langgraphs_reader_and_rolled_back(scratch_db, monkeypatch):
    """Fault injection: a rewrite whose snapshots lose their last message reads differently through
    LangGraph's delta reader; the verification names the checkpoint and both digests, and rolls back."""
    _full_thread(scratch_db)
    before = raw_rows(scratch_db, "t")
    real = compact_plan.compacted_row

    def lossy(tup, value, decision):
        return real(tup, (value or [])[:-1] if decision.snapshot else value, decision)

    monkeypatch.setattr(compact_writer, "compacted_row", lossy)
    report = compact_thread(scratch_db, "t", snapshot_frequency=3)
    assert report.status == "verification_failed", report.status
    diff = report.first_difference
    assert (diff["expected_sha256"] and diff["delta_reader_sha256"]
            and diff["expected_sha256"] != diff["delta_reader_sha256"])
    assert diff["checkpoint_id"] in checkpoint_ids(scratch_db, "t")
    assert report.error and "reads checkpoint" in report.error and "rolled back" in report.hint
    assert raw_rows(scratch_db, "t") == before and backup_ids(scratch_db) == [] and report.backup_id is None


def test_the_real_reads_at_the_sample_catch_what_a_wrong_rule_would_miss(scratch_db, monkeypatch):
    """Fault injection twice: the same lossy rewrite, and LangGraph's replayed read rule made to report
    every expected digest; the real ``get_state`` reads at the heads, seams and spread still see the loss."""
    _full_thread(scratch_db)
    before = raw_rows(scratch_db, "t")
    real = compact_plan.compacted_row
    monkeypatch.setattr(compact_writer, "compacted_row", lambda tup, value, decision: real(
        tup, (value or [])[:-1] if decision.snapshot else value, decision))
    expected: dict = {}
    real_verify = integrity.verify_against_langgraph

    def verify(session, thread_id, digests, digest, seams=(), **kwargs):
        digests = list(digests)
        expected.update({(ns, cid): d for ns, cid, d in digests})
        return real_verify(session, thread_id, digests, digest, seams, **kwargs)

    monkeypatch.setattr(compactor, "verify_against_langgraph", verify)
    monkeypatch.setattr(LangGraphRule, "read_thread", lambda self, session, thread_id: iter(
        [RuleRead(ns, cid, d) for (ns, cid), d in expected.items()]))
    report = compact_thread(scratch_db, "t", snapshot_frequency=3)
    assert report.status == "verification_failed", report.status
    diff = report.first_difference
    assert diff["expected_sha256"] != diff["delta_reader_sha256"]
    assert ("", diff["checkpoint_id"]) in sample_points(expected, spread=integrity.SAMPLE_SPREAD)
    assert raw_rows(scratch_db, "t") == before and backup_ids(scratch_db) == [] and report.backup_id is None


def test_an_unknown_thread_is_not_found(scratch_db):
    _full_thread(scratch_db, turns=1)
    for report in (compact_thread(scratch_db, "nope", snapshot_frequency=10),
                   dry_run_compact(scratch_db, "nope", snapshot_frequency=10)):
        assert report.status == "not_found" and report.hint == "Check the thread id."


def test_a_delta_thread_is_already_delta_and_untouched(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, mode="delta", tool_every=2)
        for t in range(5):
            run_turn(graph, "d", human(t), mode="delta")
    before = raw_rows(scratch_db, "d")
    assert dry_run_compact(scratch_db, "d", snapshot_frequency=10).status == "already_delta"
    report = compact_thread(scratch_db, "d", snapshot_frequency=10)
    assert report.status == "already_delta" and report.bytes_freed == 0 and report.snapshot_positions == []
    assert raw_rows(scratch_db, "d") == before and backup_ids(scratch_db) == []


@pytest.mark.parametrize("bad", [0, -3])
def test_a_bad_cadence_is_refused_before_anything_is_read(scratch_db, bad):
    with pytest.raises(ValueError, match="snapshot_frequency must be at least 1"):
        compact_thread(scratch_db, "t", snapshot_frequency=bad)


def test_the_memory_backend_is_refused():
    with pytest.raises(ValueError, match="persistent backend"):
        dry_run_compact(DatabaseConfig(backend="memory"), "t", snapshot_frequency=10)
