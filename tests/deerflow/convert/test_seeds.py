"""Seeds: a stored ``_DeltaSnapshot`` or a plain pre-delta list starts the replay; a stored ``None`` does not.

Also LangGraph 1.2.x's fresh-thread layouts: a thread begun by ``invoke``,
by DeerFlow's create-thread ``put`` of an empty checkpoint, and by a state
update before any run.
"""

from __future__ import annotations

import datetime as dt

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert import convert_thread
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.support import (
    Crafter,
    agent_graph,
    config_for,
    convert_and_compare,
    human,
    ids_of,
    messages_at,
    open_saver,
    raw_rows,
    run_turn,
    stored_tuples,
)


def test_snapshot_seeds_and_their_own_writes(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, snapshot_frequency=3, tool_every=2)
        for t in range(6):
            run_turn(graph, "snap", human(t))
    tuples = stored_tuples(scratch_db, "snap")
    snapshots = [t for t in tuples if isinstance(t.checkpoint["channel_values"].get("messages"), _DeltaSnapshot)]
    assert len(snapshots) >= 4
    # a snapshot checkpoint's own writes still apply to its children
    assert any(any(w[1] == "messages" for w in t.pending_writes) for t in snapshots)

    convert_and_compare(scratch_db, "snap")

    for t in stored_tuples(scratch_db, "snap"):
        assert t.checkpoint["channel_values"].get("messages") is None or isinstance(
            t.checkpoint["channel_values"]["messages"], list)


def test_plain_pre_delta_value_seeds_a_migrated_thread(scratch_db):
    with open_saver(scratch_db) as saver:
        full = agent_graph(saver, mode="full", tool_every=2)
        for t in range(3):
            run_turn(full, "migrated", human(t), mode="full")
    full_rows = raw_rows(scratch_db, "migrated")["checkpoints"]
    with open_saver(scratch_db) as saver:
        delta = agent_graph(saver, mode="delta", tool_every=2)
        for t in range(3, 6):
            run_turn(delta, "migrated", human(t))

    report = convert_and_compare(scratch_db, "migrated")

    after = raw_rows(scratch_db, "migrated")["checkpoints"]
    # the full-mode half is left byte-identical; only the delta half was rewritten
    assert [r for r in after if r in full_rows] == full_rows
    assert report.checkpoints_to_rewrite == len(after) - len(full_rows)
    assert ids_of(messages_at(scratch_db, "migrated", mode="full"))[:2] == ["h-0", "ai-1"]


def test_stored_none_is_not_a_seed(scratch_db):
    """root --h0--> c1 --a0--> c2 (stores messages=None) --h1--> c3.

    LangGraph's reader restarts from ``[]`` at a stored ``None``; the spec says
    a stored ``None`` is no seed, so the value flows through it.
    """
    with open_saver(scratch_db) as saver:
        craft = Crafter(saver, "none")
        root = craft.checkpoint(None, bump=False)
        craft.writes(root, "input", [HumanMessage("q0", id="h0")])
        c1 = craft.checkpoint(root)
        craft.writes(c1, "agent", [AIMessage("a0", id="a0")])
        c2 = craft.checkpoint(c1, messages=None)
        craft.writes(c2, "input2", [HumanMessage("q1", id="h1")])
        c3 = craft.checkpoint(c2)
    assert messages_at(scratch_db, "none", c2, mode="delta") == []  # LangGraph's reading

    report = convert_thread(scratch_db, "none", integrity=False)

    assert report.status == "converted"
    assert ids_of(messages_at(scratch_db, "none", c2, mode="full")) == ["h0", "a0"]
    assert ids_of(messages_at(scratch_db, "none", c3, mode="full")) == ["h0", "a0", "h1"]


def test_fresh_thread_started_by_invoke(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver)
        run_turn(graph, "fresh", human(0))
    first = stored_tuples(scratch_db, "fresh")[-1]
    assert first.parent_config is None and first.metadata["step"] == -1
    convert_and_compare(scratch_db, "fresh")
    assert ids_of(messages_at(scratch_db, "fresh", mode="full")) == ["h-0", "ai-1"]


def test_fresh_thread_created_by_deerflow_create_path(scratch_db):
    with open_saver(scratch_db) as saver:
        saver.put(config_for("created"), empty_checkpoint(),
                  {"step": -1, "source": "input", "writes": None, "parents": {},
                   "created_at": dt.datetime.now(dt.UTC).isoformat()}, {})
        graph = agent_graph(saver)
        run_turn(graph, "created", human(0))
        run_turn(graph, "created", human(1))
    convert_and_compare(scratch_db, "created")
    assert ids_of(messages_at(scratch_db, "created", mode="full")) == ["h-0", "ai-1", "h-1", "ai-3"]


def test_fresh_thread_started_by_a_state_update(scratch_db):
    with open_saver(scratch_db) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
        accessor.update(config_for("updated"), {"messages": [HumanMessage("seeded", id="seed")], "title": "t"},
                        as_node="manual_state_update")
        graph = agent_graph(saver)
        run_turn(graph, "updated", human(0))
    convert_and_compare(scratch_db, "updated")
    assert ids_of(messages_at(scratch_db, "updated", mode="full")) == ["seed", "h-0", "ai-2"]
