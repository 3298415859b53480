"""Ordering: a checkpoint's writes replay in ``(task_path, task_id, idx)`` order, as LangGraph does.

Parallel writes of a real fan-out superstep keep their live (task_path)
order; crafted writes whose ``task_path`` order disagrees with ``task_id``
order follow ``task_path``; writes of several tasks without ``task_path``
are replayed by ``task_id`` and flagged ``order_unknown`` (not blocking).
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from deerflow.convert import dry_run_thread
from tests.deerflow.convert.support import (
    Crafter,
    convert_and_compare,
    fanout_graph,
    findings_of,
    human,
    ids_of,
    messages_at,
    open_saver,
    run_turn,
)


def test_parallel_tool_writes_keep_task_path_order(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = fanout_graph(saver)
        live = [run_turn(graph, "fan", human(t)) for t in range(3)]
    report = convert_and_compare(scratch_db, "fan")
    assert findings_of(report, "order_unknown") == []
    head = messages_at(scratch_db, "fan", mode="full")
    tools = [m.id for m in head if m.type == "tool"]
    # a_tool's task path sorts before z_tool's, whatever the (random) task ids
    assert tools == [f"tool-call-{name}-{n}" for n in (1, 6, 11) for name in ("a_tool", "z_tool")]
    # ... which is also the order the live run produced
    assert ids_of(head) == ids_of(live[-1]["messages"])


def _parallel_writes(db, *, paths: tuple[str, str]) -> list[str]:
    """root --h0--> c1 --(task-b: A, task-a: B)--> c2. Returns the ids [root, c1, c2]."""
    with open_saver(db) as saver:
        craft = Crafter(saver, "par")
        root = craft.checkpoint(None, bump=False)
        craft.writes(root, "input", [HumanMessage("q", id="h0")], task_path="~__pregel_pull, __start__")
        c1 = craft.checkpoint(root)
        craft.writes(c1, "task-b", [AIMessage("from b", id="A")], task_path=paths[0])
        craft.writes(c1, "task-a", [AIMessage("from a", id="B")], task_path=paths[1])
        c2 = craft.checkpoint(c1)
    return [root, c1, c2]


def test_task_path_order_wins_over_task_id(scratch_db):
    root, c1, c2 = _parallel_writes(scratch_db, paths=("~__pregel_pull, a_node", "~__pregel_pull, b_node"))
    assert ids_of(messages_at(scratch_db, "par", c2, mode="delta")) == ["h0", "A", "B"]
    report = convert_and_compare(scratch_db, "par")
    assert findings_of(report, "order_unknown") == []
    assert ids_of(messages_at(scratch_db, "par", c2, mode="full")) == ["h0", "A", "B"]


def test_writes_without_task_path_are_flagged_order_unknown(scratch_db):
    root, c1, c2 = _parallel_writes(scratch_db, paths=("", ""))
    dry = dry_run_thread(scratch_db, "par")
    assert dry.status == "needs_conversion"
    flagged = findings_of(dry, "order_unknown")
    assert [(f["checkpoint_id"], f["blocking"]) for f in flagged] == [(c1, False)]
    # one task without a path (the input write at the root) is no ambiguity
    assert all(f["checkpoint_id"] != root for f in dry.findings)

    report = convert_and_compare(scratch_db, "par")
    assert [f["checkpoint_id"] for f in findings_of(report, "order_unknown")] == [c1]
    # replayed by task_id, as LangGraph's reader does
    assert ids_of(messages_at(scratch_db, "par", c2, mode="full")) == ["h0", "B", "A"]
