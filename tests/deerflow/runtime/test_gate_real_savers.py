"""The fail-closed gate on real savers: memory, SQLite and Postgres, sync and async.

Spec, "The fail-closed gate": a delta thread is seeded through a real graph
and the accessor; a full-mode ``CheckpointStateAccessor`` then refuses every
surface (get, history, get_metadata, update and their async twins) with
``CheckpointModeMismatchError``, and the refused write leaves every saver
table untouched. The same saver then serves a delta accessor and a full
thread normally, so the refusals are not an artefact of a broken saver.
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Overwrite

from deerflow.errors import MISMATCH_MESSAGE
from deerflow.runtime.checkpoint_mode import CheckpointModeMismatchError
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.savers import open_async_checkpointer, open_checkpointer
from tests.backends import WITH_MEMORY
from tests.deerflow.support import (
    build_agent_graph,
    config_for,
    count_calls,
    database_for,
    digest_of,
    row_counts,
    run_turn,
)

BACKEND_PARAMS = WITH_MEMORY  # memory, sqlite, postgres (tests/backends.py)

DELTA_THREAD = "gate-delta"
FULL_THREAD = "gate-full"
WRITE_METHODS = ("put", "put_writes", "aput", "aput_writes")


def _seed(saver: Any) -> dict[str, str]:
    """A delta thread (3 turns at cadence 3, then an accessor write) and a full thread (2 turns)."""
    delta_graph = build_agent_graph("delta", saver, snapshot_frequency=3, tool_every=2)
    for turn in (1, 2, 3):
        run_turn(delta_graph, DELTA_THREAD, "delta", turn)
    delta_accessor = CheckpointStateAccessor.for_saver(saver, mode="delta", snapshot_frequency=3)
    head = delta_accessor.update(config_for(DELTA_THREAD), {"title": "seeded"}, as_node="manual_state_update")
    full_graph = build_agent_graph("full", saver)
    for turn in (1, 2):
        run_turn(full_graph, FULL_THREAD, "full", turn)
    oldest = list(saver.list(config_for(DELTA_THREAD)))[-1]
    return {"head": head["configurable"]["checkpoint_id"], "oldest": oldest.config["configurable"]["checkpoint_id"]}


def _assert_mismatch(exc_info: pytest.ExceptionInfo, thread_id: str = DELTA_THREAD) -> None:
    assert str(exc_info.value) == MISMATCH_MESSAGE
    assert exc_info.value.thread_id == thread_id
    assert exc_info.value.detail == f"Thread {thread_id}: {MISMATCH_MESSAGE}"


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_full_mode_accessor_refuses_a_delta_thread_sync(backend, tmp_path):
    with ExitStack() as stack:
        database = stack.enter_context(database_for(backend, tmp_path))
        with open_checkpointer(database, create=True) as writer:
            ids = _seed(writer)
            memory_saver = writer if backend == "memory" else None
        saver = memory_saver or stack.enter_context(open_checkpointer(database))  # reopen
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        calls = count_calls(saver, "get_tuple", "list", "get_delta_channel_history", *WRITE_METHODS)

        addresses = [config_for(DELTA_THREAD), config_for(DELTA_THREAD, ids["head"]),
                     config_for(DELTA_THREAD, ids["oldest"])]
        for config in addresses:
            calls.clear()
            with pytest.raises(CheckpointModeMismatchError) as info:
                full.get(config)
            _assert_mismatch(info)
            # the gate runs on the materialized snapshot: one checkpoint fetch, no extra round-trip
            assert calls["get_tuple"] == 1 and calls["list"] == 0
            assert calls["get_delta_channel_history"] <= 1
            calls.clear()
            with pytest.raises(CheckpointModeMismatchError) as info:
                full.get_metadata(config)
            _assert_mismatch(info)
            # metadata-only: nothing is materialized
            assert dict(calls) == {"get_tuple": 1}
        calls.clear()
        with pytest.raises(CheckpointModeMismatchError) as info:
            full.history(config_for(DELTA_THREAD))
        _assert_mismatch(info)
        with pytest.raises(CheckpointModeMismatchError) as info:
            full.history(config_for(DELTA_THREAD), limit=1)
        _assert_mismatch(info)
        assert calls["list"] == 2 and calls["get_tuple"] == 0

        before = row_counts(database, saver)
        for config in (config_for(DELTA_THREAD), config_for(DELTA_THREAD, ids["oldest"])):
            with pytest.raises(CheckpointModeMismatchError) as info:
                full.update(config, {"messages": Overwrite([HumanMessage("lost", id="lost")]), "title": "x"},
                            as_node="manual_state_update")
            _assert_mismatch(info)
        assert row_counts(database, saver) == before
        assert sum(calls[m] for m in WRITE_METHODS) == 0

        # not vacuous: the same saver reads the thread in delta mode, and takes a full-mode write
        delta = CheckpointStateAccessor.for_saver(saver, mode="delta")
        head = delta.get(config_for(DELTA_THREAD))
        assert head.values["title"] == "seeded" and len(head.values["messages"]) == 8
        assert [s.config["configurable"]["checkpoint_id"]
                for s in delta.history(config_for(DELTA_THREAD))][0] == ids["head"]
        full.update(config_for(FULL_THREAD), {"title": "renamed"}, as_node="manual_state_update")
        after = row_counts(database, saver)
        assert after["checkpoints"] == before["checkpoints"] + 1
        assert full.get(config_for(FULL_THREAD)).values["title"] == "renamed"
        assert calls["put"] == 1


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_full_mode_accessor_refuses_a_delta_thread_async(backend, tmp_path):
    with ExitStack() as stack:
        database = stack.enter_context(database_for(backend, tmp_path))
        with open_checkpointer(database, create=True) as writer:
            ids = _seed(writer)
            memory_saver = writer if backend == "memory" else None

        async def scenario() -> None:
            async with open_async_checkpointer(database) as opened:
                saver = memory_saver or opened  # memory: the seeded instance, async methods
                full = CheckpointStateAccessor.for_saver(saver, mode="full")
                calls = count_calls(saver, "aget_tuple", "alist", "aget_delta_channel_history", *WRITE_METHODS)
                addresses = [config_for(DELTA_THREAD), config_for(DELTA_THREAD, ids["head"]),
                             config_for(DELTA_THREAD, ids["oldest"])]
                for config in addresses:
                    calls.clear()
                    with pytest.raises(CheckpointModeMismatchError) as info:
                        await full.aget(config)
                    _assert_mismatch(info)
                    assert calls["aget_tuple"] == 1 and calls["alist"] == 0
                    assert calls["aget_delta_channel_history"] <= 1
                    calls.clear()
                    with pytest.raises(CheckpointModeMismatchError) as info:
                        await full.aget_metadata(config)
                    _assert_mismatch(info)
                    assert dict(calls) == {"aget_tuple": 1}
                calls.clear()
                with pytest.raises(CheckpointModeMismatchError) as info:
                    await full.ahistory(config_for(DELTA_THREAD))
                _assert_mismatch(info)
                assert calls["alist"] == 1 and calls["aget_tuple"] == 0

                before = row_counts(database, saver)
                with pytest.raises(CheckpointModeMismatchError) as info:
                    await full.aupdate(config_for(DELTA_THREAD), {"messages": Overwrite([]), "title": "x"},
                                       as_node="manual_state_update")
                _assert_mismatch(info)
                assert row_counts(database, saver) == before
                assert sum(calls[m] for m in WRITE_METHODS) == 0

                delta = CheckpointStateAccessor.for_saver(saver, mode="delta")
                head = await delta.aget(config_for(DELTA_THREAD))
                assert head.values["title"] == "seeded" and len(head.values["messages"]) == 8
                history = await delta.ahistory(config_for(DELTA_THREAD))
                assert history[0].config["configurable"]["checkpoint_id"] == ids["head"]
                assert digest_of(history[0]) == digest_of(head)
                await full.aupdate(config_for(FULL_THREAD), {"title": "renamed"}, as_node="manual_state_update")
                assert row_counts(database, saver)["checkpoints"] == before["checkpoints"] + 1
                assert (await full.aget(config_for(FULL_THREAD))).values["title"] == "renamed"

        asyncio.run(scenario())
