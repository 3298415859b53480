"""Overwrite and removal: ``Overwrite`` resets, ``REMOVE_ALL_MESSAGES`` clears, stored wrappers are
unwrapped and reported, and a ``RemoveMessage`` of an unknown id is a finding, not a crash."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.types import Overwrite

from deerflow.convert import convert_thread, dry_run_thread
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.support import (
    Crafter,
    agent_graph,
    all_rows,
    backup_ids,
    config_for,
    convert_and_compare,
    findings_of,
    human,
    ids_of,
    messages_at,
    open_saver,
    run_turn,
    stored_tuples,
    summarizing_graph,
)


def test_overwrite_resets_the_value(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, tool_every=3)
        for t in range(4):
            run_turn(graph, "ow", human(t))
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta", as_node="manual_compaction")
        tail = messages_at(scratch_db, "ow", mode="delta")[-2:]
        accessor.update(config_for("ow"), {
            "messages": Overwrite([HumanMessage("summary", name="summary", id="summary"), *tail]),
            "summary_text": "s"}, as_node="manual_compaction")
        for t in range(4, 6):
            run_turn(graph, "ow", human(t))
    convert_and_compare(scratch_db, "ow")
    head = ids_of(messages_at(scratch_db, "ow", mode="full"))
    assert head[:3] == ["summary", *ids_of(tail)]
    assert "h-0" not in head and head.count("h-4") == 1


def test_remove_all_messages_clears(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = summarizing_graph(saver, summarize_on_turn=4)
        for t in range(6):
            run_turn(graph, "rm-all", human(t))
    summary_texts = {t.config["configurable"]["checkpoint_id"]: t.checkpoint["channel_values"].get("summary_text")
                     for t in stored_tuples(scratch_db, "rm-all")}
    assert any(summary_texts.values())
    convert_and_compare(scratch_db, "rm-all")
    # everything before the (last) REMOVE_ALL write is gone; what follows it is kept in order
    assert ids_of(messages_at(scratch_db, "rm-all", mode="full")) == ["h-4", "ai-5-h-4", "h-5", "ai-3-h-5"]
    assert {t.config["configurable"]["checkpoint_id"]: t.checkpoint["channel_values"].get("summary_text")
            for t in stored_tuples(scratch_db, "rm-all")} == summary_texts


FORMS = {
    "object": lambda v: Overwrite(v),
    "sentinel_dict": lambda v: {"__overwrite__": v},
    "erased_dict": lambda v: {"type": "__overwrite__", "value": v},
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_overwrite_wrapper_in_a_delta_blob_is_unwrapped_and_reported(scratch_db, form):
    """root --h0--> c1 (stores a wrapped list) --h1--> c2."""
    with open_saver(scratch_db) as saver:
        craft = Crafter(saver, "wrapped")
        root = craft.checkpoint(None, bump=False)
        craft.writes(root, "input", [HumanMessage("q0", id="h0")])
        c1 = craft.checkpoint(root, messages=FORMS[form]([HumanMessage("kept", id="k0"), AIMessage("x", id="x")]))
        craft.writes(c1, "input", [HumanMessage("q1", id="h1")])
        c2 = craft.checkpoint(c1)

    # LangGraph's reader hands back the wrapper itself: the integrity check reports it, nothing is written
    before = all_rows(scratch_db)
    dry = dry_run_thread(scratch_db, "wrapped")
    assert dry.status == "integrity_mismatch"
    assert dry.first_difference["checkpoint_id"] == c1
    assert dry.first_difference["langgraph_sha256"] is None and dry.first_difference["langgraph_error"]
    assert [(f["checkpoint_id"], f["blocking"]) for f in findings_of(dry, "overwrite_in_blob")] == [(c1, False)]
    assert convert_thread(scratch_db, "wrapped").status == "integrity_mismatch"
    assert all_rows(scratch_db) == before and backup_ids(scratch_db) == []

    # the operator's decision: convert with the unwrapped value
    report = convert_thread(scratch_db, "wrapped", integrity=False)
    assert report.status == "converted"
    assert [f["checkpoint_id"] for f in findings_of(report, "overwrite_in_blob")] == [c1]
    assert ids_of(messages_at(scratch_db, "wrapped", c1, mode="full")) == ["k0", "x"]
    assert ids_of(messages_at(scratch_db, "wrapped", c2, mode="full")) == ["k0", "x", "h1"]
    stored = {t.config["configurable"]["checkpoint_id"]: t.checkpoint["channel_values"].get("messages")
              for t in stored_tuples(scratch_db, "wrapped")}
    assert isinstance(stored[c1], list) and ids_of(stored[c1]) == ["k0", "x"]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_overwrite_wrapper_in_a_full_thread_is_unwrapped(scratch_db, form):
    """A full-mode thread (no marker) whose first stored value is a wrapper: only that checkpoint changes."""
    with open_saver(scratch_db) as saver:
        craft = Crafter(saver, "full-wrapped")
        c0 = craft.checkpoint(None, messages=FORMS[form]([HumanMessage("q0", id="h0")]), marker=False)
        c1 = craft.checkpoint(c0, messages=[HumanMessage("q0", id="h0"), AIMessage("a0", id="a0")], marker=False)
    report = convert_thread(scratch_db, "full-wrapped", integrity=False)
    assert report.status == "converted" and report.checkpoints_to_rewrite == 1
    assert [f["checkpoint_id"] for f in findings_of(report, "overwrite_in_blob")] == [c0]
    assert ids_of(messages_at(scratch_db, "full-wrapped", c0, mode="full")) == ["h0"]
    assert ids_of(messages_at(scratch_db, "full-wrapped", c1, mode="full")) == ["h0", "a0"]
    again = convert_thread(scratch_db, "full-wrapped")
    assert again.status == "already_full" and findings_of(again, "overwrite_in_blob") == []


def test_remove_message_of_unknown_id_is_a_finding_not_a_crash(scratch_db):
    """root --h0--> c1 --[RemoveMessage('ghost'), a0]--> c2 --h1--> c3, and a healthy subgraph namespace."""
    with open_saver(scratch_db) as saver:
        craft = Crafter(saver, "ghost")
        root = craft.checkpoint(None, bump=False)
        craft.writes(root, "input", [HumanMessage("q0", id="h0")])
        c1 = craft.checkpoint(root)
        craft.writes(c1, "agent", [RemoveMessage(id="ghost"), AIMessage("a0", id="a0")])
        c2 = craft.checkpoint(c1)
        craft.writes(c2, "input", [HumanMessage("q1", id="h1")])
        craft.checkpoint(c2)
        sub = Crafter(saver, "ghost", ns="research:1")
        sub.chain(2)
    before = all_rows(scratch_db)

    dry = dry_run_thread(scratch_db, "ghost")
    assert dry.status == "blocked"
    errors = findings_of(dry, "reducer_error")
    assert [(f["checkpoint_id"], f["checkpoint_ns"], f["blocking"]) for f in errors] == [(c2, "", True)]
    assert "ghost" in errors[0]["detail"] and c1 in errors[0]["detail"]
    assert dry.head_messages_sha256 is None
    # the rest of the thread was still analyzed: the healthy namespace's checkpoints are counted
    assert dry.checkpoints_total == 4 + 5

    report = convert_thread(scratch_db, "ghost")
    assert report.status == "blocked" and findings_of(report, "reducer_error") == errors
    assert all_rows(scratch_db) == before and backup_ids(scratch_db) == []
