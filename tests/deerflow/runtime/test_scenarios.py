"""The fixture's scenarios, written by the tests themselves, on memory, SQLite and Postgres.

Each scenario is written twice through real graphs: once by a full-mode
process and once by a delta-mode process (the marker injected, the pre-run
gate called, as DeerFlow does). The oracle is the full-mode twin: the delta
accessor must materialize every checkpoint of the delta thread exactly like
the full accessor materializes the matching checkpoint of the full thread
(the full twin stores the whole list in every checkpoint), and the head must
equal the live run's final state. The gate is asymmetric: full refuses the
delta thread, delta reads the full thread.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Overwrite

from deerflow.convert.digest import EMPTY_MESSAGES_SHA256, canonical_messages, messages_sha256
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    CheckpointModeMismatchError,
    ensure_checkpoint_mode_compatible,
)
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.savers import open_async_checkpointer, open_checkpointer
from tests.backends import WITH_MEMORY
from tests.deerflow.support import (
    build_agent_graph,
    config_for,
    database_for,
    digest_of,
    run_turn,
)

K = 3  # a small cadence, so every scenario crosses several snapshots


def _turns(graph: Any, saver: Any, thread: str, mode: str, turns: range, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for turn in turns:
        ensure_checkpoint_mode_compatible(saver, config_for(thread), mode)  # DeerFlow's pre-run gate
        out = run_turn(graph, thread, mode, turn, **kw)
    return out


def plain(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    return _turns(build_agent_graph(mode, saver, snapshot_frequency=K), saver, thread, mode, range(1, 11))


def tools(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    return _turns(build_agent_graph(mode, saver, snapshot_frequency=K, tool_every=2), saver, thread, mode, range(1, 9))


def remove_message(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    graph = build_agent_graph(mode, saver, snapshot_frequency=K, remove_on_turn=5)
    return _turns(graph, saver, thread, mode, range(1, 8))


def remove_all(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    graph = build_agent_graph(mode, saver, snapshot_frequency=K, tool_every=3, summarize_on_turn=5)
    return _turns(graph, saver, thread, mode, range(1, 9))


def compaction(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    graph = build_agent_graph(mode, saver, snapshot_frequency=K, tool_every=2)
    _turns(graph, saver, thread, mode, range(1, 6))
    accessor = CheckpointStateAccessor.for_saver(saver, mode=mode, snapshot_frequency=K, as_node="manual_compaction")
    tail = accessor.get(config_for(thread)).values["messages"][-2:]
    accessor.update(
        config_for(thread),
        {"messages": Overwrite([HumanMessage("summary so far", id="summary", name="summary"), *tail]),
         "summary_text": "so far"},
        as_node="manual_compaction",
    )
    return _turns(graph, saver, thread, mode, range(6, 8))


def title_and_todos(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    graph = build_agent_graph(mode, saver, snapshot_frequency=K)
    _turns(graph, saver, thread, mode, range(1, 4))
    accessor = CheckpointStateAccessor.for_saver(saver, mode=mode, snapshot_frequency=K)
    accessor.update(config_for(thread), {"title": "First title", "todos": Overwrite([{"content": "a"}]),
                                         "artifacts": Overwrite(["/out/a.md"])}, as_node="manual_state_update")
    accessor.update(config_for(thread), {"title": "Renamed", "todos": Overwrite([{"content": "b"}])},
                    as_node="manual_state_update")
    return _turns(graph, saver, thread, mode, range(4, 6))


def fork(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    graph = build_agent_graph(mode, saver, snapshot_frequency=K, tool_every=3)
    _turns(graph, saver, thread, mode, range(1, 3))
    fork_point = saver.get_tuple(config_for(thread)).config["configurable"]["checkpoint_id"]
    _turns(graph, saver, thread, mode, range(3, 7))
    run_turn(graph, thread, mode, 100, checkpoint_id=fork_point)  # resume from end of turn 2
    return _turns(graph, saver, thread, mode, range(101, 104))


def idless_humans(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    graph = build_agent_graph(mode, saver, snapshot_frequency=K)
    return _turns(graph, saver, thread, mode, range(1, 8), human_id=False)


def fanout(saver: Any, thread: str, mode: str) -> dict[str, Any]:
    graph = build_agent_graph(mode, saver, snapshot_frequency=K, tool_every=2, fanout=True)
    return _turns(graph, saver, thread, mode, range(1, 7))


SCENARIOS: dict[str, Callable[[Any, str, str], dict[str, Any]]] = {
    "plain": plain, "tools": tools, "remove_message": remove_message, "remove_all": remove_all,
    "compaction": compaction, "title_and_todos": title_and_todos, "fork": fork,
    "idless_humans": idless_humans, "fanout": fanout,
}
BACKEND_PARAMS = WITH_MEMORY  # memory, sqlite, postgres (tests/backends.py)


def _without_ids(snapshot: Any) -> tuple[Any, ...]:
    canonical = canonical_messages(snapshot.values.get("messages", []))
    for c in canonical:
        c["id"] = None
    return len(canonical), repr(canonical), digest_of(snapshot)[2]


def _unordered(snapshot: Any) -> tuple[Any, ...]:
    return Counter(repr(c) for c in canonical_messages(snapshot.values.get("messages", []))), digest_of(snapshot)[2]


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_delta_reads_like_its_full_twin(name, backend, tmp_path):
    with database_for(backend, tmp_path) as database:
        with open_checkpointer(database, create=True) as saver:
            live = {mode: SCENARIOS[name](saver, f"{name}-{mode}", mode) for mode in ("full", "delta")}
            full = CheckpointStateAccessor.for_saver(saver, mode="full")
            delta = CheckpointStateAccessor.for_saver(saver, mode="delta")
            delta_thread = delta.history(config_for(f"{name}-delta"))
            full_thread = full.history(config_for(f"{name}-full"))
            assert len(delta_thread) == len(full_thread) > 10
            assert all(s.metadata[CHECKPOINT_MODE_METADATA_KEY] == "delta" for s in delta_thread)
            assert [s.next for s in delta_thread] == [s.next for s in full_thread]

            key = digest_of
            if name == "idless_humans":
                key = _without_ids  # the full twin ids them with add_messages' uuid4
            elif name == "fanout" and backend == "sqlite":
                key = _unordered  # SQLite replays same-superstep writes in task_id order (fixture README)
            assert [key(s) for s in delta_thread] == [key(s) for s in full_thread]

            # every checkpoint read on its own equals its history entry
            for snapshot in delta_thread:
                assert digest_of(delta.get(snapshot.config)) == digest_of(snapshot)
            # the head equals what the live run ended with (the replay order caveat aside)
            if not (name == "fanout" and backend == "sqlite"):
                assert messages_sha256(delta_thread[0].values["messages"]) == messages_sha256(live["delta"]["messages"])
            assert messages_sha256(full_thread[0].values["messages"]) == messages_sha256(live["full"]["messages"])

            # the asymmetric gate
            with pytest.raises(CheckpointModeMismatchError):
                full.history(config_for(f"{name}-delta"))
            with pytest.raises(CheckpointModeMismatchError):
                full.get(delta_thread[-1].config)
            assert [digest_of(s) for s in delta.history(config_for(f"{name}-full"))] == [
                digest_of(s) for s in full_thread]

        if backend != "memory":  # async savers on the same database read the same values
            async def async_read() -> list[Any]:
                async with open_async_checkpointer(database) as asaver:
                    accessor = CheckpointStateAccessor.for_saver(asaver, mode="delta")
                    history = await accessor.ahistory(config_for(f"{name}-delta"))
                    head = await accessor.aget(config_for(f"{name}-delta"))
                    assert digest_of(head) == digest_of(history[0])
                    return [digest_of(s) for s in history]

            assert asyncio.run(async_read()) == [digest_of(s) for s in delta_thread]


def test_idless_human_messages_keep_their_ids_across_live_run_and_replay():
    """merge_message_writes ids them deterministically, so a replay re-creates the live ids."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    live = idless_humans(saver, "idl", "delta")
    accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
    first = accessor.get(config_for("idl")).values["messages"]
    second = asyncio.run(accessor.aget(config_for("idl"))).values["messages"]
    assert [m.id for m in first] == [m.id for m in second] == [m.id for m in live["messages"]]
    assert all(m.id for m in first) and len({m.id for m in first}) == len(first) == 14


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_empty_thread_created_like_deerflows_post_threads(backend, tmp_path):
    """One aput of an empty checkpoint, no marker: both modes read an empty list."""
    with database_for(backend, tmp_path) as database:
        async def scenario() -> None:
            async with open_async_checkpointer(database, create=True) as saver:
                from datetime import UTC, datetime

                await saver.aput(
                    config_for("empty"), empty_checkpoint(),
                    {"step": -1, "source": "input", "writes": None, "parents": {},
                     "created_at": datetime.now(UTC).isoformat()},
                    {},
                )
                for mode in ("full", "delta"):
                    accessor = CheckpointStateAccessor.for_saver(saver, mode=mode)
                    head = await accessor.aget(config_for("empty"))
                    assert head.values.get("messages", []) == []
                    assert messages_sha256(head.values.get("messages")) == EMPTY_MESSAGES_SHA256
                    assert CHECKPOINT_MODE_METADATA_KEY not in head.metadata
                    assert len(await accessor.ahistory(config_for("empty"))) == 1
                    assert (await accessor.aget_metadata(config_for("empty")))["step"] == -1

        asyncio.run(scenario())
