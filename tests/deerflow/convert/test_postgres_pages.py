"""``iter_postgres_checkpoints`` gives exactly the tuples ``PostgresSaver.list`` gives, on every stored shape.

The compactor's walk and its verification read Postgres pages with three plain
statements instead of LangGraph's aggregating list query; these tests compare
the two readers tuple for tuple (config, checkpoint with its decoded channel
values, metadata, parent config, pending writes in LangGraph's order) on the
real fixture (delta, full, migrated and markerless threads, subgraph
namespaces, checkpoints of format 2, checkpoints naming versions with no
blob), on hand-built full threads (a fork, an ``Overwrite``, a subgraph) and
on format-3 checkpoints whose pending sends LangGraph migrates while listing
(read through ``saver.list`` itself), at several page sizes.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import TASKS
from langgraph.types import Overwrite, Send

from deerflow.convert.postgres_pages import iter_postgres_checkpoints
from deerflow.convert.reading import iter_session_checkpoints
from deerflow.convert.storage import open_session
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.support import (
    agent_graph,
    checkpoint_ids,
    config_for,
    human,
    open_saver,
    run_turn,
    sql,
    subgraph_graph,
)


def _listed(session, thread_id: str, ns: str) -> list:
    return list(session.saver.list(config_for(thread_id, ns=ns)))


def _paged(session, thread_id: str, ns: str, page_size: int) -> list:
    return list(iter_postgres_checkpoints(session.saver, session.conn, thread_id, ns, page_size=page_size))


def _namespaces(database) -> list[tuple[str, str]]:
    with sql(database) as conn:
        rows = conn.execute("SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints ORDER BY 1, 2").fetchall()
    return [tuple(r) for r in rows]


def test_every_fixture_namespace_pages_as_the_saver_lists_it(postgres_fixture_db):
    pairs = _namespaces(postgres_fixture_db)
    assert any(ns for _tid, ns in pairs), "the fixture no longer holds a subgraph namespace"
    compared = 0
    with open_session(postgres_fixture_db, write=False) as session:
        for thread_id, ns in pairs:
            listed = _listed(session, thread_id, ns)
            assert _paged(session, thread_id, ns, 8) == listed, (thread_id, ns)
            compared += len(listed)
        # page boundaries anywhere: every size up to a few pages on the namespaces with the odd shapes
        for thread_id, ns in pairs[:6]:
            listed = _listed(session, thread_id, ns)
            for size in (1, 3, len(listed) or 1, len(listed) + 1):
                assert _paged(session, thread_id, ns, size) == listed, (thread_id, ns, size)
    with sql(postgres_fixture_db) as conn:
        assert compared == conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]


def _full_thread(db, thread_id: str) -> None:
    """Full-mode turns with tool calls, a fork, an ``Overwrite`` and a subgraph thread beside it."""
    with open_saver(db) as saver:
        graph = agent_graph(saver, mode="full", tool_every=2)
        for t in range(6):
            run_turn(graph, thread_id, human(t), mode="full")
        run_turn(graph, thread_id, human(40), checkpoint_id=checkpoint_ids(db, thread_id)[-5], mode="full")
        CheckpointStateAccessor.for_saver(saver, mode="full").update(
            {"configurable": {"thread_id": thread_id}}, {"messages": Overwrite([human(99)])})
        run_turn(graph, thread_id, human(7), mode="full")
        nested = subgraph_graph(saver)
        for t in range(3):
            run_turn(nested, f"{thread_id}-sub", human(t))


def test_hand_built_full_threads_page_as_the_saver_lists_them(empty_postgres_db):
    _full_thread(empty_postgres_db, "t")
    pairs = _namespaces(empty_postgres_db)
    assert {tid for tid, _ns in pairs} == {"t", "t-sub"} and any(ns for _tid, ns in pairs)
    with open_session(empty_postgres_db, write=False) as session:
        for thread_id, ns in pairs:
            listed = _listed(session, thread_id, ns)
            assert listed, (thread_id, ns)
            for size in (1, 2, 8, 1000):
                assert _paged(session, thread_id, ns, size) == listed, (thread_id, ns, size)
            # the session reader picks this path on Postgres
            assert list(iter_session_checkpoints(session, thread_id, ns)) == listed


def test_pre_format_4_checkpoints_are_listed_with_their_sends_migrated(empty_postgres_db):
    with open_saver(empty_postgres_db) as saver:
        parent = empty_checkpoint()
        parent["v"] = 3
        parent_config = saver.put(config_for("old"), parent, {"source": "input", "step": -1}, {})
        saver.put_writes(parent_config, [(TASKS, Send("agent", {"n": 1})), (TASKS, Send("agent", {"n": 2}))],
                         task_id="task-1")
        for step in range(3):
            child = empty_checkpoint()
            child["v"] = 3
            # a version to take the max of (with none, LangGraph draws a random one for the sends at every list)
            child["channel_versions"] = {"branch:to:agent": f"{step + 1:032}.0.5"}
            parent_config = saver.put(parent_config, child, {"source": "loop", "step": step}, {})
    with open_session(empty_postgres_db, write=False) as session:
        listed = _listed(session, "old", "")
        assert len(listed) == 4
        # LangGraph moved the parent's sends into the first child's channel values while listing
        assert [len(t.checkpoint["channel_values"].get(TASKS) or []) for t in listed] == [0, 0, 2, 0]
        for size in (1, 2, 3, 8):
            assert _paged(session, "old", "", size) == listed, size


def test_an_unknown_thread_or_namespace_pages_nothing(empty_postgres_db):
    _full_thread(empty_postgres_db, "t")
    with open_session(empty_postgres_db, write=False) as session:
        assert _paged(session, "no-such-thread", "", 8) == []
        assert _paged(session, "t", "no-such-namespace", 8) == []


def test_a_page_size_below_one_is_refused(empty_postgres_db):
    with open_session(empty_postgres_db, write=False) as session, \
            pytest.raises(ValueError, match="page_size must be at least 1, got 0"):
        next(iter_postgres_checkpoints(session.saver, session.conn, "t", "", page_size=0))
