"""The integrity check: the one-pass materialization against LangGraph's own delta reader.

A checkpoint in the middle of a delta thread is re-stored with ``messages =
None``. LangGraph's reader restarts that checkpoint from ``[]``; the
one-pass (a stored ``None`` is no seed) carries the value through. That is a
known departure (issue 13, item 3): reported as the ``stored_none`` finding,
expected by the check, converted with the replay rule's value. Any other
difference stops the conversion: the check reports the first differing
checkpoint with both digests and nothing is written until an operator
decides (``integrity=False``) -- e.g. a stored ``Overwrite`` wrapper, which
LangGraph's reader takes as the value itself.

The check reads every checkpoint by LangGraph's read rule replayed along the
tree and a sample through ``get_state``: each disagreement is caught whether
or not it sits at a sampled checkpoint, and a rule that disagreed with the
real reader at the sample would stop the conversion too.
"""

from __future__ import annotations

import pytest

from deerflow.convert import convert_thread, dry_run_thread, integrity
from deerflow.convert.digest import messages_sha256
from deerflow.convert.langgraph_rule import LangGraphRule, RuleRead, sample_points
from tests.deerflow.convert.support import (
    agent_graph,
    all_rows,
    backup_ids,
    config_for,
    human,
    messages_at,
    open_saver,
    readings,
    run_turn,
    stored_tuples,
)

THREAD = "corrupt"


def _corrupted(db, at: float = 0.5, *, stored: object = None) -> tuple[str, list]:
    """Five turns; then the checkpoint at fraction ``at`` (a non-seed position) is re-stored with
    ``messages = stored``."""
    with open_saver(db) as saver:
        graph = agent_graph(saver, tool_every=2)
        for t in range(5):
            run_turn(graph, THREAD, human(t))
        tuples = list(reversed(list(saver.list(config_for(THREAD)))))
        victim = tuples[int(len(tuples) * at)]
        assert "messages" not in victim.checkpoint["channel_values"]  # not a seed
        truth = messages_at(db, THREAD, victim.config["configurable"]["checkpoint_id"], mode="delta")
        assert truth
        value = {"__overwrite__": truth} if stored == "overwrite" else stored
        checkpoint = {**victim.checkpoint, "channel_values": {**victim.checkpoint["channel_values"], "messages": value}}
        # a non-primitive value reaches Postgres's blob table only when its version is announced
        new_versions = {} if value is None else {"messages": checkpoint["channel_versions"]["messages"]}
        saver.put(config_for(THREAD, victim.parent_config["configurable"]["checkpoint_id"]), checkpoint,
                  victim.metadata, new_versions)
    return victim.config["configurable"]["checkpoint_id"], truth


def test_a_stored_none_is_an_expected_difference_and_converts_with_the_replay_rule(scratch_db):
    victim, truth = _corrupted(scratch_db)
    assert messages_at(scratch_db, THREAD, victim, mode="delta") == []  # what LangGraph's reader now shows

    dry = dry_run_thread(scratch_db, THREAD)
    report = convert_thread(scratch_db, THREAD)

    for r in (dry, report):
        assert r.first_difference is None, (r.status, r.error)
        assert [f["checkpoint_id"] for f in r.findings if f["kind"] == "stored_none"] == [victim]
    assert dry.status == "needs_conversion" and report.status == "converted"
    assert [m.id for m in messages_at(scratch_db, THREAD, victim, mode="full")] == [m.id for m in truth]


def test_integrity_check_reports_the_first_difference_and_writes_nothing(scratch_db):
    victim, truth = _corrupted(scratch_db, stored="overwrite")
    before = all_rows(scratch_db)

    dry = dry_run_thread(scratch_db, THREAD)
    report = convert_thread(scratch_db, THREAD)

    for r in (dry, report):
        assert r.status == "integrity_mismatch", (r.status, r.error)
        assert r.first_difference["checkpoint_id"] == victim and r.first_difference["checkpoint_ns"] == ""
        assert r.first_difference["onepass_sha256"] == messages_sha256(truth)
        assert r.first_difference["langgraph_sha256"] != messages_sha256(truth)
        assert victim in r.error and r.hint
        assert r.backup_id is None
    assert all_rows(scratch_db) == before
    assert backup_ids(scratch_db) == []

    # the operator decides for the one-pass value: convert without the check
    decided = convert_thread(scratch_db, THREAD, integrity=False)
    assert decided.status == "converted"
    assert [m.id for m in messages_at(scratch_db, THREAD, victim, mode="full")] == [m.id for m in truth]


def test_integrity_check_passes_on_consistent_threads(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, snapshot_frequency=3, tool_every=2)
        for t in range(6):
            run_turn(graph, "ok", human(t))
    dry = dry_run_thread(scratch_db, "ok", integrity=True)
    assert dry.status == "needs_conversion" and dry.first_difference is None
    report = convert_thread(scratch_db, "ok", integrity=True)
    assert report.status == "converted" and report.first_difference is None
    assert len(readings(scratch_db, "ok", "full")) == len(stored_tuples(scratch_db, "ok"))


def _sampled(db, thread_id: str) -> list[str]:
    return [cid for _ns, cid in sample_points([("", t.config["configurable"]["checkpoint_id"])
                                                for t in stored_tuples(db, thread_id)], spread=integrity.SAMPLE_SPREAD)]


@pytest.mark.parametrize("at", [0.3, 0.85])
def test_a_difference_away_from_the_sampled_checkpoints_is_caught_by_the_rule(scratch_db, at):
    victim, truth = _corrupted(scratch_db, at, stored="overwrite")
    assert victim not in _sampled(scratch_db, THREAD)  # only the replayed rule reads it
    before = all_rows(scratch_db)
    sampled = _sampled(scratch_db, THREAD)
    for r in (dry_run_thread(scratch_db, THREAD), convert_thread(scratch_db, THREAD)):
        assert r.status == "integrity_mismatch", (r.status, r.error)
        # Postgres keeps one blob per messages version, so a checkpoint sharing the victim's version may
        # read the wrapper first; either way the difference is one only the replayed rule saw
        assert r.first_difference["checkpoint_id"] not in sampled
        assert r.first_difference["onepass_sha256"] != r.first_difference["langgraph_sha256"]
        if scratch_db.backend == "sqlite":
            assert r.first_difference["checkpoint_id"] == victim
            assert r.first_difference["onepass_sha256"] == messages_sha256(truth)
    assert all_rows(scratch_db) == before and backup_ids(scratch_db) == []


@pytest.mark.parametrize("at", [0.3, 0.85])
def test_a_stored_none_away_from_the_sample_is_the_expected_finding_not_a_mismatch(scratch_db, at):
    victim, truth = _corrupted(scratch_db, at)
    assert victim not in _sampled(scratch_db, THREAD)
    report = convert_thread(scratch_db, THREAD)
    assert report.status == "converted" and report.first_difference is None, (report.status, report.error)
    assert [f["checkpoint_id"] for f in report.findings if f["kind"] == "stored_none"] == [victim]
    assert [m.id for m in messages_at(scratch_db, THREAD, victim, mode="full")] == [m.id for m in truth]


def test_a_stored_overwrite_wrapper_reads_differently_through_langgraph(scratch_db):
    """The one-pass unwraps a stored ``{"__overwrite__": [...]}`` (finding ``overwrite_in_blob``);
    LangGraph's reader takes the wrapper itself as the value, so the check stops the conversion."""
    victim, truth = _corrupted(scratch_db, 0.3, stored="overwrite")
    before = all_rows(scratch_db)
    report = convert_thread(scratch_db, THREAD)
    assert report.status == "integrity_mismatch", (report.status, report.error)
    assert report.first_difference["checkpoint_id"] == victim
    assert report.first_difference["onepass_sha256"] == messages_sha256(truth)
    assert report.first_difference["langgraph_sha256"] != messages_sha256(truth)
    assert any(f["kind"] == "overwrite_in_blob" for f in report.findings)
    assert all_rows(scratch_db) == before and backup_ids(scratch_db) == []


def test_a_rule_that_disagrees_with_langgraphs_reader_at_the_sample_stops_the_conversion(scratch_db, monkeypatch):
    """Fault injection: the replayed rule misreads the head; the real ``get_state`` read there disagrees, so
    the check refuses (the rule cannot vouch for the checkpoints read only by it)."""
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, snapshot_frequency=3, tool_every=2)
        for t in range(4):
            run_turn(graph, "ok", human(t))
    head = max(t.config["configurable"]["checkpoint_id"] for t in stored_tuples(scratch_db, "ok"))
    real = LangGraphRule.read_namespace

    def misreading(self, ns, tuples, paths):
        for r in real(self, ns, tuples, paths):
            yield RuleRead(ns, r.checkpoint_id, "0" * 64) if r.checkpoint_id == head else r

    monkeypatch.setattr(LangGraphRule, "read_namespace", misreading)
    before = all_rows(scratch_db)
    for r in (dry_run_thread(scratch_db, "ok"), convert_thread(scratch_db, "ok")):
        assert r.status == "integrity_mismatch", (r.status, r.error)
        assert r.first_difference["checkpoint_id"] == head and r.first_difference["rule_sha256"] == "0" * 64
        assert r.first_difference["langgraph_sha256"] == messages_at_digest(scratch_db, "ok", head)
        assert "read rule" in r.error
    assert all_rows(scratch_db) == before and backup_ids(scratch_db) == []


def messages_at_digest(db, thread_id: str, checkpoint_id: str) -> str:
    return messages_sha256(messages_at(db, thread_id, checkpoint_id, mode="delta"))

