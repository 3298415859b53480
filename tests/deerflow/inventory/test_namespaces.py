"""deerflow.inventory.namespaces: a
thread's checkpoint namespaces, against the fixture manifest and a real nested subgraph."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from deerflow.inventory.namespaces import has_subgraph_namespaces, namespace_path, thread_namespaces
from deerflow.storage.savers import open_checkpointer
from deerflow.storage.sqlread import checkpoint_time
from tests import fixtures_real
from tests.backends import BACKENDS
from tests.deerflow.support import database_for


def _expected(thread: dict, backend: str) -> list[tuple[str, int, str, str]]:
    """``(checkpoint_ns, count, first id, head id)`` per namespace, in the manifest's order (root, then creation)."""
    order: dict[str, list[str]] = {}
    for cp in thread["backends"][backend]["checkpoints"]:  # newest first inside a namespace
        order.setdefault(cp["checkpoint_ns"], []).append(cp["checkpoint_id"])
    return [(ns, len(ids), ids[-1], ids[0]) for ns, ids in order.items()]


def test_every_fixture_thread_lists_the_manifests_namespaces(fixture_backend):
    backend, database = fixture_backend
    threads = fixtures_real.manifest_threads()
    with open_checkpointer(database) as saver:
        for thread_id, thread in threads.items():
            found = thread_namespaces(saver, thread_id)
            assert [(n.checkpoint_ns, n.checkpoint_count, n.first_checkpoint_id, n.head_checkpoint_id)
                    for n in found] == _expected(thread, backend), thread_id
            assert {n.checkpoint_ns: n.checkpoint_count for n in found} == \
                thread["backends"][backend]["namespace_checkpoint_counts"]
            assert all(n.updated_at == checkpoint_time(n.head_checkpoint_id) and n.updated_at for n in found)


def test_the_subgraph_thread_has_two_research_runs_after_its_root(fixture_backend):
    _backend, database = fixture_backend
    with open_checkpointer(database) as saver:
        found = thread_namespaces(saver, "delta-f10-subgraph")
    assert [(n.path, n.depth, n.checkpoint_count) for n in found] == [
        ((), 0, 24), (("research",), 1, 5), (("research",), 1, 5)]
    assert found[1].first_checkpoint_id < found[2].first_checkpoint_id  # creation order
    assert found[0].as_dict()["checkpoint_ns"] == "" and found[1].as_dict()["path"] == ["research"]


def test_the_subgraph_probe_agrees_with_the_manifest_on_every_fixture_thread(fixture_backend):
    backend, database = fixture_backend
    threads = fixtures_real.manifest_threads()
    with open_checkpointer(database) as saver:
        answers = {thread_id: has_subgraph_namespaces(saver, thread_id) for thread_id in threads}
    expected = {thread_id: any(ns != "" for ns in thread["backends"][backend]["namespace_checkpoint_counts"])
                for thread_id, thread in threads.items()}
    assert answers == expected
    assert True in answers.values() and False in answers.values()  # the fixture has both kinds


def test_an_unknown_thread_has_no_namespaces(sqlite_fixture_db):
    with open_checkpointer(sqlite_fixture_db) as saver:
        assert thread_namespaces(saver, "no-such-thread") == []
        assert has_subgraph_namespaces(saver, "no-such-thread") is False


class _S(TypedDict):
    log: Annotated[list, operator.add]


def _nested_graph(saver):
    """root -> ``research`` (a compiled subgraph) -> ``browse`` (a compiled subgraph) -> ``leaf``."""
    def leaf(_state: _S) -> dict:
        return {"log": ["leaf"]}

    inner = StateGraph(_S)
    inner.add_node("leaf", leaf)
    inner.add_edge(START, "leaf")
    mid = StateGraph(_S)
    mid.add_node("browse", inner.compile())
    mid.add_edge(START, "browse")
    outer = StateGraph(_S)
    outer.add_node("research", mid.compile())
    outer.add_edge(START, "research")
    return outer.compile(checkpointer=saver)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_subgraphs_written_by_langgraph_get_their_paths(backend, tmp_path):
    with database_for(backend, tmp_path) as database, open_checkpointer(database, create=True) as saver:
        _nested_graph(saver).invoke({"log": []}, {"configurable": {"thread_id": "nested"}})
        found = thread_namespaces(saver, "nested")
        assert has_subgraph_namespaces(saver, "nested") is True
    assert [n.path for n in found] == [(), ("research",), ("research", "browse")]
    assert found[2].checkpoint_ns.startswith(found[1].checkpoint_ns + "|browse:")
    assert [n.depth for n in found] == [0, 1, 2]


@pytest.mark.parametrize(("checkpoint_ns", "path"), [
    ("", ()),
    ("research:9c3f", ("research",)),
    ("research:9c3f|browse:a9e9", ("research", "browse")),
    ("hand-written", ("hand-written",)),
    ("tool:a:b", ("tool",)),
])
def test_namespace_path_splits_on_langgraphs_separators(checkpoint_ns, path):
    assert namespace_path(checkpoint_ns) == path


def test_a_saver_without_sql_tables_is_a_type_error():
    for read in (thread_namespaces, has_subgraph_namespaces):
        with pytest.raises(TypeError, match="InMemorySaver has no SQL tables"):
            read(InMemorySaver(), "t")
