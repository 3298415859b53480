"""The integrity check: the one-pass materialization against LangGraph's own delta reader.

A checkpoint in the middle of a delta thread is re-stored with ``messages =
None``. LangGraph's reader restarts that checkpoint from ``[]``; the
one-pass (a stored ``None`` is no seed) carries the value through. That is a
known departure (issue 13, item 3): reported as the ``stored_none`` finding,
expected by the check, converted with the replay rule's value. Any other
difference stops the conversion: the check reports the first differing
checkpoint with both digests (shown by handing it a one-pass digest that is
not the replay's).
"""

from __future__ import annotations

from deerflow.convert import convert_thread, dry_run_thread
from deerflow.digest import messages_sha256
from tests.convert.support import (
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


def _corrupted(db) -> tuple[str, list]:
    """Five turns; then the middle checkpoint (a non-seed position) is re-stored with messages=None."""
    with open_saver(db) as saver:
        graph = agent_graph(saver, tool_every=2)
        for t in range(5):
            run_turn(graph, THREAD, human(t))
        tuples = list(reversed(list(saver.list(config_for(THREAD)))))
        victim = tuples[len(tuples) // 2]
        assert "messages" not in victim.checkpoint["channel_values"]  # not a seed
        truth = messages_at(db, THREAD, victim.config["configurable"]["checkpoint_id"], mode="delta")
        assert truth
        checkpoint = {**victim.checkpoint, "channel_values": {**victim.checkpoint["channel_values"], "messages": None}}
        saver.put(config_for(THREAD, victim.parent_config["configurable"]["checkpoint_id"]), checkpoint,
                  victim.metadata, {})
    return victim.config["configurable"]["checkpoint_id"], truth


def test_a_stored_none_is_an_expected_difference_and_converts_with_the_replay_rule(db):
    victim, truth = _corrupted(db)
    assert messages_at(db, THREAD, victim, mode="delta") == []  # what LangGraph's reader now shows

    dry = dry_run_thread(db, THREAD)
    report = convert_thread(db, THREAD)

    for r in (dry, report):
        assert r.first_difference is None, (r.status, r.error)
        assert [f["checkpoint_id"] for f in r.findings if f["kind"] == "stored_none"] == [victim]
    assert dry.status == "needs_conversion" and report.status == "converted"
    assert [m.id for m in messages_at(db, THREAD, victim, mode="full")] == [m.id for m in truth]


def test_integrity_check_reports_the_first_difference_and_writes_nothing(db):
    from deerflow.convert.delta_reader import check_against_langgraph
    from deerflow.convert.report import Abort
    from deerflow.convert.storage import open_session

    with open_saver(db) as saver:
        graph = agent_graph(saver, tool_every=2)
        for t in range(3):
            run_turn(graph, THREAD, human(t))
        tuples = list(reversed(list(saver.list(config_for(THREAD)))))
    victim = tuples[len(tuples) // 2].config["configurable"]["checkpoint_id"]
    truth = messages_at(db, THREAD, victim, mode="delta")
    before = all_rows(db)
    wrong = messages_sha256(truth[:-1])
    with open_session(db, write=False) as session:
        try:
            check_against_langgraph(session, THREAD, [("", victim, wrong)])
        except Abort as exc:
            assert exc.status == "integrity_mismatch" and victim in exc.error and exc.hint
            assert exc.difference == {"checkpoint_id": victim, "checkpoint_ns": "", "onepass_sha256": wrong,
                                      "langgraph_sha256": messages_sha256(truth)}
        else:
            raise AssertionError("no integrity_mismatch")
        check_against_langgraph(session, THREAD, [("", victim, wrong, "stored_none")])  # an expected difference
    assert all_rows(db) == before
    assert backup_ids(db) == []


def test_integrity_check_passes_on_consistent_threads(db):
    with open_saver(db) as saver:
        graph = agent_graph(saver, snapshot_frequency=3, tool_every=2)
        for t in range(6):
            run_turn(graph, "ok", human(t))
    dry = dry_run_thread(db, "ok", integrity=True)
    assert dry.status == "needs_conversion" and dry.first_difference is None
    report = convert_thread(db, "ok", integrity=True)
    assert report.status == "converted" and report.first_difference is None
    assert len(readings(db, "ok", "full")) == len(stored_tuples(db, "ok"))
