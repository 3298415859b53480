"""The integrity check: the one-pass materialization against LangGraph's own delta reader.

A real divergence: a checkpoint in the middle of a delta thread is re-stored
with ``messages = None``. LangGraph's reader restarts that checkpoint from
``[]``; the one-pass (a stored ``None`` is no seed) carries the value
through. The check reports the first differing checkpoint with both digests
and nothing is written until an operator decides (``integrity=False``).
"""

from __future__ import annotations

from deerflow.convert import convert_thread, dry_run_thread
from deerflow.digest import EMPTY_MESSAGES_SHA256, messages_sha256
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


def test_integrity_check_reports_the_first_difference_and_writes_nothing(db):
    victim, truth = _corrupted(db)
    assert messages_at(db, THREAD, victim, mode="delta") == []  # what LangGraph's reader now shows
    before = all_rows(db)

    dry = dry_run_thread(db, THREAD)
    report = convert_thread(db, THREAD)

    for r in (dry, report):
        assert r.status == "integrity_mismatch", (r.status, r.error)
        assert r.first_difference == {"checkpoint_id": victim, "checkpoint_ns": "",
                                      "onepass_sha256": messages_sha256(truth),
                                      "langgraph_sha256": EMPTY_MESSAGES_SHA256}
        assert victim in r.error and r.hint
        assert r.backup_id is None
    assert all_rows(db) == before
    assert backup_ids(db) == []

    # the operator decides for the one-pass value: convert without the check
    decided = convert_thread(db, THREAD, integrity=False)
    assert decided.status == "converted"
    assert [m.id for m in messages_at(db, THREAD, victim, mode="full")] == [m.id for m in truth]


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
