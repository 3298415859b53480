"""Ids: id-less messages get the same id on every materialization, and conversion writes those ids,
so a ``RemoveMessage`` issued after the conversion still matches."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage

from deerflow.convert import dry_run_thread
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
    readings,
    run_turn,
    stored_tuples,
)


def _idless_thread(db) -> None:
    """Six turns whose stored writes carry no message ids (LangGraph 1.2.x stamps ids on what a graph
    writes, so id-less writes come from older writers; they are stored with the saver's own put_writes).
    Two answers have the same content, so content alone cannot tell them apart."""
    with open_saver(db) as saver:
        craft = Crafter(saver, "idless")
        parent = craft.checkpoint(None, bump=False)
        for t in range(6):
            craft.writes(parent, f"input-{t}", [HumanMessage(f"q{t}")])
            parent = craft.checkpoint(parent)
            craft.writes(parent, f"agent-{t}", [AIMessage("ok" if t in (1, 4) else f"a{t}")])
            parent = craft.checkpoint(parent)
    written = [w[2] for t in stored_tuples(db, "idless") for w in t.pending_writes if w[1] == "messages"]
    assert len(written) == 12 and all(m.id is None for write in written for m in write)


def test_idless_messages_get_the_same_ids_on_every_materialization(scratch_db):
    _idless_thread(scratch_db)
    first = messages_at(scratch_db, "idless", mode="delta")
    assert all(m.id for m in first) and len(set(ids_of(first))) == len(first)
    assert ids_of(messages_at(scratch_db, "idless", mode="delta")) == ids_of(first)
    assert readings(scratch_db, "idless", "delta") == readings(scratch_db, "idless", "delta")
    assert (dry_run_thread(scratch_db, "idless").head_messages_sha256
            == dry_run_thread(scratch_db, "idless").head_messages_sha256)


def test_conversion_writes_the_ids_and_a_later_remove_message_matches(scratch_db):
    _idless_thread(scratch_db)
    before = messages_at(scratch_db, "idless", mode="delta")
    convert_and_compare(scratch_db, "idless")

    head = stored_tuples(scratch_db, "idless")[0]
    assert ids_of(head.checkpoint["channel_values"]["messages"]) == ids_of(before)

    victim = before[0]  # the first human message, written without an id
    assert victim.type == "human"
    with open_saver(scratch_db) as saver:
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        full.update(config_for("idless"), {"messages": [RemoveMessage(id=victim.id)]})
        graph = agent_graph(saver, mode="full", with_ids=False)
        run_turn(graph, "idless", human(9, with_id=False), mode="full")
    after = messages_at(scratch_db, "idless", mode="full")
    assert victim.id not in ids_of(after)
    assert ids_of(after)[: len(before) - 1] == ids_of(before)[1:]
