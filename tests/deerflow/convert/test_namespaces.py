"""Namespaces: every walk stays inside one ``checkpoint_ns``; subgraph namespaces convert with the root."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from deerflow.convert import convert_thread
from tests.deerflow.convert.support import (
    Crafter,
    all_rows,
    backup_ids,
    checkpoint_ids,
    convert_and_compare,
    findings_of,
    human,
    ids_of,
    messages_at,
    namespaces,
    open_saver,
    readings,
    run_turn,
    subgraph_graph,
)


def test_subgraph_namespaces_convert_with_the_root(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = subgraph_graph(saver)
        for t in range(3):
            run_turn(graph, "sub", human(t))
    spaces = namespaces(scratch_db, "sub")
    assert spaces[0] == "" and len(spaces) == 4 and all(ns.startswith("research:") for ns in spaces[1:])

    report = convert_and_compare(scratch_db, "sub")

    assert report.checkpoints_total == sum(len(checkpoint_ids(scratch_db, "sub", ns)) for ns in spaces)
    after = readings(scratch_db, "sub", "full")
    assert {ns for ns, _cid in after} == set(spaces)
    for ns in spaces[1:]:
        sub_head = ids_of(messages_at(scratch_db, "sub", ns=ns, mode="full"))
        assert sub_head[-2].startswith("r-") and sub_head[-1].startswith("rep-")
    root_head = ids_of(messages_at(scratch_db, "sub", mode="full"))
    assert [i for i in root_head if i.startswith("h-")] == ["h-0", "h-1", "h-2"]


def test_same_checkpoint_ids_in_two_namespaces_stay_apart(scratch_db):
    """Two namespaces whose checkpoints share ids and parent ids but hold different writes."""
    with open_saver(scratch_db) as saver:
        root = Crafter(saver, "twins")
        root_ids = root.chain(2)
        twin = Crafter(saver, "twins", ns="research:1")
        parent = twin.checkpoint(None, bump=False, checkpoint_id=root_ids[0])
        for i, cid in enumerate(root_ids[1:]):
            twin.writes(parent, f"t{i}", [AIMessage(f"sub {i}", id=f"s{i}")])
            parent = twin.checkpoint(parent, checkpoint_id=cid)
    assert checkpoint_ids(scratch_db, "twins", "research:1") == checkpoint_ids(scratch_db, "twins", "")
    convert_and_compare(scratch_db, "twins")
    assert ids_of(messages_at(scratch_db, "twins", mode="full")) == ["h0", "a0", "h1", "a1"]
    assert ids_of(messages_at(scratch_db, "twins", ns="research:1", mode="full")) == ["s0", "s1", "s2", "s3"]


def test_a_parent_in_another_namespace_is_dangling(scratch_db):
    with open_saver(scratch_db) as saver:
        root_ids = Crafter(saver, "cross").chain(1)
        sub = Crafter(saver, "cross", ns="research:2")
        first = sub.checkpoint(root_ids[-1], bump=False)  # parent id exists only in the root namespace
        sub.writes(first, "t", [HumanMessage("x", id="x")])
        sub.checkpoint(first)
    before = all_rows(scratch_db)
    report = convert_thread(scratch_db, "cross")
    assert report.status == "blocked"
    dangling = findings_of(report, "dangling_parent")
    assert [(f["checkpoint_id"], f["checkpoint_ns"]) for f in dangling][0] == (first, "research:2")
    assert all(f["checkpoint_ns"] == "research:2" for f in report.findings if f["blocking"])
    assert all_rows(scratch_db) == before and backup_ids(scratch_db) == []
