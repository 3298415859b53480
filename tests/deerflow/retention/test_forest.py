"""The keep-last rule over a :class:`~deerflow.retention.plan.Forest` built from columns (the batch path: no
``Node`` per checkpoint, writes owners looked up for leaves only) plans exactly what it plans from nodes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from deerflow.retention.plan import Forest, Node, plan_keep_last

_NONE: dict[str, object] = {}


@st.composite
def threads(draw: st.DrawFn) -> tuple[list[Node], set[str], int]:
    """A thread: a root namespace and up to two subgraph-call namespaces, each a random tree (branches,
    several roots), writes owners anywhere, some protected ids and a keep count."""
    nodes: list[Node] = []
    root_ids: list[str] = []
    spaces = ["", *[f"tools:{i}" for i in range(draw(st.integers(0, 2)))]]
    serial = 0
    for ns in spaces:
        ids: list[str] = []
        for _ in range(draw(st.integers(1, 12))):
            serial += 1
            cid = f"{serial:04d}"
            parent = draw(st.none() | st.sampled_from(ids)) if ids and draw(st.integers(0, 5)) else (
                ids[-1] if ids else None)
            metadata = {"parents": {"": draw(st.sampled_from(root_ids))}} if ns and root_ids and draw(
                st.booleans()) else _NONE
            nodes.append(Node(ns, cid, parent, metadata, _NONE, draw(st.booleans())))
            ids.append(cid)
        if not ns:
            root_ids = ids
    protect = set(draw(st.lists(st.sampled_from([n.checkpoint_id for n in nodes]), max_size=3)))
    return nodes, protect, draw(st.integers(1, 5))


def _from_columns(nodes: list[Node]) -> Forest:
    """The forest the batch reads: columns, call roots, and the owners among leaves."""
    forest = Forest.of_columns([n.ns for n in nodes], [n.checkpoint_id for n in nodes],
                               [n.parent_id for n in nodes],
                               {n.key: n.metadata["parents"] for n in nodes if "parents" in n.metadata})
    named = {(n.ns, n.parent_id) for n in nodes}
    forest.owners.update(n.key for n in nodes if n.owns_writes and n.key not in named)
    return forest


@settings(max_examples=300, deadline=None)
@given(threads())
def test_the_batch_forest_plans_what_the_nodes_plan(thread: tuple[list[Node], set[str], int]) -> None:
    nodes, protect, n = thread
    assert plan_keep_last(_from_columns(nodes), n, protect) == plan_keep_last(nodes, n, protect)


def test_a_leaf_owning_writes_is_kept_and_an_inner_owner_is_not_asked() -> None:
    # 1 <- 3 <- 4 (head) and 1 <- 2 (a leaf with pending writes); 3 owns writes too (not a leaf)
    nodes = [Node("", "1", None, _NONE, _NONE, False), Node("", "2", "1", _NONE, _NONE, True),
             Node("", "3", "1", _NONE, _NONE, True), Node("", "4", "3", _NONE, _NONE, False)]
    forest = _from_columns(nodes)
    assert forest.owners == {("", "2")}
    plan = plan_keep_last(forest, 1)
    assert plan.protected == {("", "4"): "head", ("", "2"): "pending_writes"}
    assert plan.kept == {("", "2"), ("", "4")} and plan.deleted == {("", "1"), ("", "3")}
    assert plan.chain_starts == {("", "2"), ("", "4")} and plan.unbranchable == {("", "1"), ("", "3")}
    assert plan == plan_keep_last(nodes, 1)


def test_a_subgraph_namespace_goes_whole_with_the_root_checkpoint_it_started_from() -> None:
    nodes = [Node("", "1", None, _NONE, _NONE, False), Node("", "2", "1", _NONE, _NONE, False),
             Node("tools:a", "3", None, {"parents": {"": "1"}}, _NONE, False),
             Node("tools:a", "4", "3", {"parents": {"": "1"}}, _NONE, False)]
    plan = plan_keep_last(_from_columns(nodes), 1)
    assert plan.deleted_namespaces == {"tools:a"}
    assert plan.deleted == {("", "1"), ("tools:a", "3"), ("tools:a", "4")} and plan.kept == {("", "2")}
    assert plan == plan_keep_last(nodes, 1)
