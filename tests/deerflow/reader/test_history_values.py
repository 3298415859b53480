"""deerflow.reader.history_values: a history row's messages from its parent's, or None where the reader must decide."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.types import Overwrite

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.reader.history_values import derive_messages


def _tup(cid: str, parent: str | None, values: dict | None = None, writes: list | None = None) -> CheckpointTuple:
    def config(c: str) -> dict:
        return {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": c}}
    return CheckpointTuple(config(cid), {"id": cid, "channel_values": values or {}}, {},
                           config(parent) if parent else None, writes or [])


H, A = HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")


def test_a_step_replays_the_parents_writes():
    parent = _tup("2", "1", writes=[("task", "messages", [A]), ("task", "other", 1)])
    got = derive_messages(_tup("3", "2"), parent, [H], delta=True)
    assert [m.id for m in got] == ["h1", "a1"]


def test_a_removal_and_a_reset_follow_the_reducer():
    parent = _tup("2", "1", writes=[("task", "messages", [RemoveMessage(id="h1")])])
    assert [m.id for m in derive_messages(_tup("3", "2"), parent, [H, A], delta=True)] == ["a1"]
    reset = _tup("2", "1", writes=[("task", "messages", Overwrite([A]))])
    assert [m.id for m in derive_messages(_tup("3", "2"), reset, [H], delta=True)] == ["a1"]


def test_a_stored_seed_wins():
    assert [m.id for m in derive_messages(_tup("3", "2", {"messages": _DeltaSnapshot([A])}), None, None,
                                          delta=True)] == ["a1"]
    assert derive_messages(_tup("3", "2", {"messages": _DeltaSnapshot(None)}), None, None, delta=True) == []
    assert [m.id for m in derive_messages(_tup("3", "2", {"messages": [H]}), None, None, delta=True)] == ["h1"]


def test_what_the_reader_must_decide_answers_none():
    parent = _tup("2", "1", writes=[("task", "messages", [A])])
    assert derive_messages(_tup("3", "2", {"messages": None}), parent, [H], delta=True) is None  # stored None
    assert derive_messages(_tup("3", "2"), None, None, delta=True) is None  # parent not on the page
    assert derive_messages(_tup("3", "x"), parent, [H], delta=True) is None  # another parent
    assert derive_messages(_tup("3", "2"), parent, None, delta=True) is None  # parent value unknown
    two_tasks = _tup("2", "1", writes=[("t1", "messages", [A]), ("t2", "messages", [H])])
    assert derive_messages(_tup("3", "2"), two_tasks, [], delta=True) is None  # order is the saver's
    refused = _tup("2", "1", writes=[("task", "messages", [RemoveMessage(id="nope")])])
    assert derive_messages(_tup("3", "2"), refused, [H], delta=True) is None  # reducer_error: the reader reports


def test_full_mode_reads_the_stored_value_alone():
    assert [m.id for m in derive_messages(_tup("3", "2", {"messages": [H, A]}), None, None,
                                          delta=False)] == ["h1", "a1"]
    assert derive_messages(_tup("3", "2"), None, None, delta=False) == []
    assert derive_messages(_tup("3", "2", {"messages": _DeltaSnapshot([A])}), None, None, delta=False) is None
