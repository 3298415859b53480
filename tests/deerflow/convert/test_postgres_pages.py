"""``iter_postgres_checkpoints`` gives exactly the tuples ``PostgresSaver.list`` gives, on every stored shape.

The compactor's walk and its verification read Postgres pages with one plain
statement instead of LangGraph's aggregating list query; these tests compare
the two readers tuple for tuple (config, checkpoint with its decoded channel
values, metadata, parent config, pending writes in LangGraph's order):

* the real fixture (delta, full, migrated and markerless threads, subgraph
  namespaces, checkpoints of format 2, checkpoints naming versions with no blob);
* hand-built full threads (a fork, an ``Overwrite``, a subgraph);
* format-3 checkpoints whose pending sends LangGraph migrates while listing
  (read through ``saver.list`` itself), also below format-4 pages;
* crafted rows: equal versions and checkpoint ids in two threads and two
  namespaces with different payloads (the filters), ``empty`` blobs, numeric,
  null and blob-less versions, an empty version map, a channel name the
  ``bytea`` cast un-escapes, an inline value a blob overrides, writes whose
  task path and task id orders disagree and LangGraph's negative error index;
* a checkpoint without a format number (LangGraph's error, not a guess);

at several page sizes.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import TASKS
from langgraph.types import Send
from psycopg.types.json import Jsonb

from deerflow.convert.postgres_pages import iter_postgres_checkpoints
from deerflow.convert.reading import iter_session_checkpoints
from deerflow.storage.sessions import open_session
from tests.deerflow.convert.support import (
    config_for,
    full_thread_with_fork,
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
        # page boundaries anywhere, on the first six namespaces and every subgraph namespace
        for thread_id, ns in pairs[:6] + [(tid, ns) for tid, ns in pairs if ns]:
            listed = _listed(session, thread_id, ns)
            for size in (1, 3, len(listed) or 1, len(listed) + 1):
                assert _paged(session, thread_id, ns, size) == listed, (thread_id, ns, size)
    with sql(postgres_fixture_db) as conn:
        assert compared == conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]


def _full_thread(db, thread_id: str) -> None:
    """Full-mode turns with tool calls, a fork, an ``Overwrite`` and a subgraph thread beside it."""
    full_thread_with_fork(db, thread_id, turns=6, tool_every=2, fork_back=5)
    with open_saver(db) as saver:
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


def _raw(conn, table: str, **row) -> None:
    cols = ", ".join(row)
    conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['%s'] * len(row))})",
                 [Jsonb(v) if isinstance(v, dict) else v for v in row.values()])


def _crafted(saver, conn, thread_id: str, ns: str, payload: str, *, fmt: int = 4, blobs: bool = True) -> list[str]:
    """Rows as a saver stores them, plus shapes it does not write today but older stores hold."""
    dumps = saver.serde.dumps_typed
    ids = [f"1f0{fmt}0000-0000-6000-8000-{i:012d}" for i in range(6)]
    shared = {"messages": "1", "plain": "2"}  # the same versions in every thread and namespace
    for i, cid in enumerate(ids):
        channel_versions = dict(shared)
        if i == 1:
            channel_versions.update({"ints": 7, "floats": 2.5, "nulls": None, "missing": "9", "empty": "3"})
        if i == 2:
            channel_versions = {}
        if i == 3:
            channel_versions["x\\\\y"] = "4"  # a name LangGraph's text::bytea cast un-escapes
        checkpoint = {"v": fmt, "id": cid, "ts": f"2026-01-0{i + 1}T00:00:00+00:00", "versions_seen": {},
                      "channel_values": {"inline": i, "plain": "inline, overridden by the blob"} if i == 4 else {},
                      "channel_versions": channel_versions}
        _raw(conn, "checkpoints", thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=cid,
             parent_checkpoint_id=ids[i - 1] if i else None, type=None, checkpoint=checkpoint,
             metadata={"source": "loop", "step": i, "payload": payload})
        # task_path order and task_id order disagree; idx -1 is LangGraph's error channel
        for task_id, path, idx, channel in (("b-task", "~__pregel_pull, a", 0, "messages"),
                                           ("a-task", "~__pregel_pull, b", 0, "messages"),
                                           ("a-task", "~__pregel_pull, b", -1, "__error__")):
            typ, blob = dumps([f"{payload} {cid} {task_id} {idx}"])
            _raw(conn, "checkpoint_writes", thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=cid,
                 task_id=task_id, task_path=path, idx=idx, channel=channel, type=typ, blob=blob)
    if not blobs:
        return ids
    for channel, version, value in (("messages", "1", [payload]), ("plain", "2", payload), ("ints", "7", 7),
                                    ("floats", "2.5", 2.5), ("x\\\\y", "4", "escaped")):
        typ, blob = dumps(value)
        _raw(conn, "checkpoint_blobs", thread_id=thread_id, checkpoint_ns=ns, channel=channel, version=version,
             type=typ, blob=blob)
    _raw(conn, "checkpoint_blobs", thread_id=thread_id, checkpoint_ns=ns, channel="empty", version="3",
         type="empty", blob=None)
    return ids


def test_crafted_shapes_and_shared_versions_page_as_the_saver_lists_them(empty_postgres_db):
    with open_saver(empty_postgres_db) as saver, sql(empty_postgres_db) as conn:
        # equal versions and checkpoint ids in two threads and two namespaces, different payloads:
        # a page that read another thread's or namespace's blob or writes would differ
        for thread_id in ("one", "two"):
            for ns in ("", "sub:1"):
                _crafted(saver, conn, thread_id, ns, f"{thread_id}/{ns}")
        # format-4 checkpoints above format-3 ones: pages run from this reader into LangGraph's own
        old = _crafted(saver, conn, "mixed", "", "old", fmt=3)
        _crafted(saver, conn, "mixed", "", "new", blobs=False)  # the older rows' blobs, at the same versions
        conn.execute("UPDATE checkpoints SET parent_checkpoint_id = %s WHERE thread_id = 'mixed' "
                     "AND checkpoint_id = '1f040000-0000-6000-8000-000000000000'", [old[-1]])
    with open_session(empty_postgres_db, write=False) as session:
        for thread_id, ns in (("one", ""), ("one", "sub:1"), ("two", ""), ("two", "sub:1"), ("mixed", "")):
            listed = _listed(session, thread_id, ns)
            assert len(listed) == (12 if thread_id == "mixed" else 6)
            for size in (1, 2, 3, 5, 8):
                assert _paged(session, thread_id, ns, size) == listed, (thread_id, ns, size)
        one = {t.config["configurable"]["checkpoint_id"]: t for t in _listed(session, "one", "sub:1")}
        # the shapes are there: skipped empty blob, numeric versions, missing blob, un-escaped name, override
        values = [one[cid].checkpoint["channel_values"] for cid in sorted(one)]
        assert values[1] == {"messages": ["one/sub:1"], "plain": "one/sub:1", "ints": 7, "floats": 2.5}
        assert values[2] == {} and values[3]["x\\y"] == "escaped"
        assert values[4] == {"inline": 4, "plain": "one/sub:1", "messages": ["one/sub:1"]}
        assert [w[1] for w in one[sorted(one)[0]].pending_writes] == ["messages", "__error__", "messages"]


def test_a_checkpoint_without_a_format_number_fails_as_langgraph_fails(empty_postgres_db):
    with open_saver(empty_postgres_db) as saver, sql(empty_postgres_db) as conn:
        _crafted(saver, conn, "t", "", "x")
        conn.execute("UPDATE checkpoints SET checkpoint = checkpoint - 'v' WHERE checkpoint_id = "
                     "'1f040000-0000-6000-8000-000000000003'")
    with open_session(empty_postgres_db, write=False) as session:
        with pytest.raises(KeyError, match="'v'"):
            _listed(session, "t", "")
        with pytest.raises(KeyError, match="'v'"):
            _paged(session, "t", "", 8)


def test_an_unknown_thread_or_namespace_pages_nothing(empty_postgres_db):
    _full_thread(empty_postgres_db, "t")
    with open_session(empty_postgres_db, write=False) as session:
        assert _paged(session, "no-such-thread", "", 8) == []
        assert _paged(session, "t", "no-such-namespace", 8) == []


def test_a_page_size_below_one_is_refused(empty_postgres_db):
    with open_session(empty_postgres_db, write=False) as session, \
            pytest.raises(ValueError, match="page_size must be at least 1, got 0"):
        next(iter_postgres_checkpoints(session.saver, session.conn, "t", "", page_size=0))
