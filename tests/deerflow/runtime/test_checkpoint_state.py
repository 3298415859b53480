"""deerflow.runtime.checkpoint_state: the accessor, the mutation graph, the degraded reader.

Spec, "Storage shape and read path" (read path, batched delta fetch, marker
re-injection on a copy) and "The fail-closed gate" (degraded accessor text).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections import Counter
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Overwrite
from typing_extensions import TypedDict

from deerflow.agents.thread_state import THREAD_STATE_REDUCER_FIELDS, merge_message_writes
from deerflow.convert.digest import messages_sha256
from deerflow.errors import MISMATCH_MESSAGE
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    INTERNAL_CHECKPOINT_MODE_KEY,
    CheckpointModeMismatchError,
    freeze_checkpoint_channel_mode,
    freeze_checkpoint_snapshot_frequency,
)
from deerflow.runtime.checkpoint_state import (
    CheckpointStateAccessor,
    DegradedFullModeReadAccessor,
    build_state_mutation_graph,
)
from deerflow.storage.savers import open_async_checkpointer, open_checkpointer
from tests.backends import WITH_MEMORY
from tests.deerflow.support import (
    build_agent_graph,
    config_for,
    count_calls,
    database_for,
    digest_of,
    run_turn,
)
from tests.fixtures_real import manifest_threads

READ_METHODS = ("get_tuple", "list", "get_delta_channel_history", "aget_tuple", "alist", "aget_delta_channel_history")
BACKEND_PARAMS = WITH_MEMORY  # memory, sqlite, postgres (tests/backends.py)


def _seeded(mode: str, turns: int = 4, thread_id: str = "acc", **kwargs: Any) -> InMemorySaver:
    saver = InMemorySaver()
    graph = build_agent_graph(mode, saver, snapshot_frequency=3, tool_every=2, **kwargs)
    for turn in range(1, turns + 1):
        run_turn(graph, thread_id, mode, turn)
    return saver


# -- construction ---------------------------------------------------------------


def test_bind_needs_a_mode_and_defaults_to_the_frozen_values():
    saver = InMemorySaver()
    with pytest.raises(ValueError, match="needs a mode"):
        CheckpointStateAccessor.for_saver(saver)
    with pytest.raises(ValueError, match="needs a mode"):
        CheckpointStateAccessor(None, saver)
    with pytest.raises(ValueError):
        CheckpointStateAccessor.for_saver(saver, mode="half")
    freeze_checkpoint_channel_mode("delta")
    freeze_checkpoint_snapshot_frequency(4)
    accessor = CheckpointStateAccessor.for_saver(saver)
    assert accessor.mode == "delta" and accessor.checkpointer is saver
    assert accessor.graph.channels["messages"].snapshot_frequency == 4
    assert CheckpointStateAccessor.for_saver(saver, mode="full").mode == "full"


def test_build_state_mutation_graph():
    params = inspect.signature(build_state_mutation_graph).parameters
    assert list(params)[:4] == ["as_node", "mode", "state_schema", "snapshot_frequency"]
    assert params["snapshot_frequency"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["state_schema"].default is None and params["snapshot_frequency"].default is None

    full = build_state_mutation_graph("manual_state_update", "full")
    assert "manual_state_update" in full.nodes
    assert isinstance(full.channels["messages"], BinaryOperatorAggregate)
    delta = build_state_mutation_graph("manual_compaction", "delta", snapshot_frequency=7)
    assert "manual_compaction" in delta.nodes
    assert isinstance(delta.channels["messages"], DeltaChannel) and delta.channels["messages"].snapshot_frequency == 7

    class Small(TypedDict):
        messages: Annotated[list[AnyMessage], DeltaChannel(merge_message_writes, snapshot_frequency=2)]

    custom = build_state_mutation_graph("rollback_restore", "delta", Small)
    assert set(custom.channels) >= {"messages"} and "title" not in custom.channels
    with pytest.raises(ValueError):
        build_state_mutation_graph("x", "bogus")


# -- prepared configs -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_prepared_config_is_a_copy_with_the_marker(mode):
    saver = _seeded(mode)
    accessor = CheckpointStateAccessor.for_saver(saver, mode=mode)
    configurable = {"thread_id": "acc", "checkpoint_ns": ""}
    metadata = {"caller": 1, CHECKPOINT_MODE_METADATA_KEY: "delta"}
    config = {"configurable": configurable, "metadata": metadata}
    pristine = copy.deepcopy(config)

    prepared = accessor.prepare_config(config)
    assert prepared["configurable"] is not configurable and prepared["metadata"] is not metadata
    assert prepared["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] == mode
    assert (CHECKPOINT_MODE_METADATA_KEY in prepared["metadata"]) is (mode == "delta")

    seen: list[dict[str, Any]] = []
    original = saver.get_tuple

    def recording(cfg: Any) -> Any:
        seen.append(copy.deepcopy(cfg))
        return original(cfg)

    saver.get_tuple = recording
    accessor.get(config)
    accessor.get_metadata(config)
    asyncio.run(accessor.aget(config))
    accessor.history(config, limit=2)
    accessor.update(config, {"title": "t"}, as_node="manual_state_update")
    assert config == pristine
    assert config["configurable"] is configurable and config["metadata"] is metadata
    assert len(seen) >= 3
    assert all(cfg["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] == mode for cfg in seen)
    # the write carried the marker for its mode (and only in delta mode)
    head = saver.get_tuple(config_for("acc"))
    assert head.metadata["source"] == "update"
    assert (head.metadata.get(CHECKPOINT_MODE_METADATA_KEY) == "delta") is (mode == "delta")
    assert INTERNAL_CHECKPOINT_MODE_KEY not in head.metadata


# -- history --------------------------------------------------------------------------


def test_limit_zero_returns_nothing_without_a_saver_call():
    saver = _seeded("delta")
    calls = count_calls(saver, *READ_METHODS)
    for mode in ("full", "delta"):
        accessor = CheckpointStateAccessor.for_saver(saver, mode=mode)
        assert accessor.history(config_for("acc"), limit=0) == []
        assert accessor.history(config_for("acc"), limit=-1) == []
        assert asyncio.run(accessor.ahistory(config_for("acc"), limit=0)) == []
    assert sum(calls.values()) == 0
    CheckpointStateAccessor.for_saver(saver, mode="delta").history(config_for("acc"), limit=1)
    assert calls["list"] == 1  # the counter does see real calls


def test_limit_none_means_all_in_saver_list_order():
    saver = _seeded("delta", turns=5)
    accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
    expected = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config_for("acc"))]
    assert len(expected) > 15
    got = [s.config["configurable"]["checkpoint_id"] for s in accessor.history(config_for("acc"))]
    assert got == expected
    assert [s.config["configurable"]["checkpoint_id"]
            for s in accessor.history(config_for("acc"), limit=None)] == expected
    agot = [s.config["configurable"]["checkpoint_id"] for s in asyncio.run(accessor.ahistory(config_for("acc")))]
    assert agot == expected


def test_history_pages_with_before_and_limit():
    saver = _seeded("delta", turns=5)
    accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
    everything = accessor.history(config_for("acc"))
    pages: list[Any] = []
    before = None
    while True:
        page = accessor.history(config_for("acc"), limit=4, before=before)
        apage = asyncio.run(accessor.ahistory(config_for("acc"), limit=4, before=before))
        assert [digest_of(s) for s in page] == [digest_of(s) for s in apage]
        if not page:
            break
        assert len(page) <= 4
        pages.extend(page)
        before = page[-1].config
    assert [s.config["configurable"]["checkpoint_id"] for s in pages] == [
        s.config["configurable"]["checkpoint_id"] for s in everything]
    assert [digest_of(s) for s in pages] == [digest_of(s) for s in everything]
    # history entries equal get() of the same checkpoint
    for snapshot in everything[::5]:
        assert digest_of(accessor.get(snapshot.config)) == digest_of(snapshot)


def test_missing_thread_reads_empty():
    accessor = CheckpointStateAccessor.for_saver(InMemorySaver(), mode="full")
    snapshot = accessor.get(config_for("nobody"))
    assert snapshot.values == {} and snapshot.metadata is None
    assert accessor.get_metadata(config_for("nobody")) is None
    assert asyncio.run(accessor.aget_metadata(config_for("nobody"))) is None
    assert accessor.history(config_for("nobody")) == []


def test_get_metadata_returns_stored_metadata_without_materializing():
    saver = _seeded("delta")
    calls = count_calls(saver, *READ_METHODS)
    accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
    metadata = accessor.get_metadata(config_for("acc"))
    assert metadata[CHECKPOINT_MODE_METADATA_KEY] == "delta"
    assert metadata == saver.get_tuple(config_for("acc")).metadata
    assert asyncio.run(accessor.aget_metadata(config_for("acc"))) == metadata
    assert calls["get_delta_channel_history"] == 0 and calls["aget_delta_channel_history"] == 0


# -- writes -----------------------------------------------------------------------


def _replace_values() -> dict[str, Any]:
    """A replace-style write in DeerFlow's gateway shape: every reducer channel in Overwrite."""
    plain = {
        "messages": [HumanMessage("summary", id="summary", name="summary"), AIMessage("kept", id="kept")],
        "sandbox": {"sandbox_id": "sb-2"},
        "artifacts": ["/out/new.md"],
        "todos": [{"content": "only this", "status": "pending"}],
        "goal": {"text": "g2"},
        "viewed_images": {"/img/b.png": {"mime_type": "image/png", "size": 2, "actual_path": "/b"}},
        "promoted": {"catalog_hash": "h2", "names": ["x"]},
        "delegations": [{"id": "d2"}],
        "skill_context": [{"path": "/skills/b"}],
    }
    assert set(plain) == THREAD_STATE_REDUCER_FIELDS
    return {**{k: Overwrite(v) for k, v in plain.items()}, "title": "Renamed", "summary_text": "sum"}


def _expected_after_replace() -> dict[str, Any]:
    return {k: (v.value if isinstance(v, Overwrite) else v) for k, v in _replace_values().items()}


def _first_values() -> dict[str, Any]:
    return {
        "sandbox": {"sandbox_id": "sb-1"}, "artifacts": ["/out/a.md"], "todos": [{"content": "t1"}],
        "goal": {"text": "g1"},
        "viewed_images": {"/img/a.png": {"mime_type": "image/png", "size": 1, "actual_path": "/a"}},
        "promoted": {"catalog_hash": "h1", "names": ["y"]}, "delegations": [{"id": "d1"}],
        "skill_context": [{"path": "/skills/a"}], "title": "First",
    }


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("mode", ["full", "delta"])
def test_update_writes_through_with_overwrite(backend, mode, tmp_path):
    with database_for(backend, tmp_path) as database, open_checkpointer(database, create=True) as saver:
        graph = build_agent_graph(mode, saver, snapshot_frequency=3, tool_every=2)
        for turn in (1, 2, 3):
            run_turn(graph, "upd", mode, turn)
        accessor = CheckpointStateAccessor.for_saver(saver, mode=mode, snapshot_frequency=3)
        accessor.update(config_for("upd"), _first_values(), as_node="manual_state_update")
        assert accessor.get(config_for("upd")).values["artifacts"] == ["/out/a.md"]
        new_config = accessor.update(config_for("upd"), _replace_values(), as_node="manual_state_update")
        assert new_config["configurable"]["thread_id"] == "upd" and new_config["configurable"]["checkpoint_id"]

        head = accessor.get(config_for("upd"))
        expected = _expected_after_replace()
        for key, value in expected.items():
            assert (head.values[key] == value if key != "messages"
                    else messages_sha256(head.values[key]) == messages_sha256(value)), key
        stored = saver.get_tuple(config_for("upd"))
        assert stored.config["configurable"]["checkpoint_id"] == new_config["configurable"]["checkpoint_id"]
        assert stored.metadata["source"] == "update"
        assert "manual_state_update" in stored.checkpoint["versions_seen"]
        assert (stored.metadata.get(CHECKPOINT_MODE_METADATA_KEY) == "delta") is (mode == "delta")
        # the thread continues on top of the replaced state
        out = run_turn(graph, "upd", mode, 4)
        assert [m.id for m in out["messages"]][:2] == ["summary", "kept"]
        assert digest_of(accessor.get(config_for("upd")))[:2] == (len(out["messages"]),
                                                                  messages_sha256(out["messages"]))


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("mode", ["full", "delta"])
def test_aupdate_writes_through_with_overwrite(backend, mode, tmp_path):
    with database_for(backend, tmp_path) as database:
        async def scenario() -> None:
            async with open_async_checkpointer(database, create=True) as saver:
                graph = build_agent_graph(mode, saver, snapshot_frequency=3, tool_every=2)
                from tests.deerflow.support import arun_turn

                for turn in (1, 2, 3):
                    await arun_turn(graph, "aupd", mode, turn)
                accessor = CheckpointStateAccessor.for_saver(saver, mode=mode, snapshot_frequency=3)
                written = len(await accessor.ahistory(config_for("aupd")))
                assert written == 11  # turns of 3 + 5 (one tool round) + 3 checkpoints
                await accessor.aupdate(config_for("aupd"), _first_values(), as_node="manual_state_update")
                await accessor.aupdate(config_for("aupd"), _replace_values(), as_node="manual_state_update")
                head = await accessor.aget(config_for("aupd"))
                for key, value in _expected_after_replace().items():
                    if key == "messages":
                        assert messages_sha256(head.values[key]) == messages_sha256(value)
                    else:
                        assert head.values[key] == value, key
                stored = await saver.aget_tuple(config_for("aupd"))
                assert stored.metadata["source"] == "update"
                assert (stored.metadata.get(CHECKPOINT_MODE_METADATA_KEY) == "delta") is (mode == "delta")
                history = await accessor.ahistory(config_for("aupd"))
                assert digest_of(history[0]) == digest_of(head)
                assert len(history) == written + 2  # one checkpoint per update

        asyncio.run(scenario())


# -- degraded reader ------------------------------------------------------------


def test_degraded_full_mode_reader():
    saver = _seeded("delta", thread_id="d")
    graph = build_agent_graph("full", saver)
    for turn in (1, 2):
        run_turn(graph, "f", "full", turn)
    degraded = DegradedFullModeReadAccessor(saver)
    with pytest.raises(CheckpointModeMismatchError) as info:
        degraded.get_values(config_for("d"))
    assert str(info.value) == MISMATCH_MESSAGE
    assert info.value.detail == f"Thread d: {MISMATCH_MESSAGE}"
    for t in saver.list(config_for("d")):
        if t.metadata.get(CHECKPOINT_MODE_METADATA_KEY):
            with pytest.raises(CheckpointModeMismatchError, match="^Thread requires delta mode"):
                degraded.get_values(t.config)
    values = degraded.get_values(config_for("f"))
    full = CheckpointStateAccessor.for_saver(saver, mode="full").get(config_for("f"))
    assert messages_sha256(values["messages"]) == messages_sha256(full.values["messages"])
    assert len(values["messages"]) == 4
    assert degraded.get_values(config_for("nobody")) is None


def test_degraded_reader_on_the_fixture(sqlite_fixture_db):
    threads = manifest_threads()
    with open_checkpointer(sqlite_fixture_db) as saver:
        degraded = DegradedFullModeReadAccessor(saver)
        for thread_id in ("full-short-3t", "delta-f10-9t", "full-compaction"):
            for cp in threads[thread_id]["backends"]["sqlite"]["checkpoints"]:
                config = config_for(thread_id, cp["checkpoint_id"], cp["checkpoint_ns"])
                if cp["full_mode_accessor"] == "raises CheckpointModeMismatchError":
                    with pytest.raises(CheckpointModeMismatchError) as info:
                        degraded.get_values(config)
                    assert str(info.value) == MISMATCH_MESSAGE
                else:
                    values = degraded.get_values(config)
                    assert messages_sha256(values.get("messages", [])) == cp["full_mode_accessor"]["messages_sha256"]


# -- read path: one batched delta fetch -------------------------------------------


def _replay_counter(monkeypatch: pytest.MonkeyPatch) -> Counter:
    calls: Counter = Counter()
    original = DeltaChannel.replay_writes

    def counting(self: DeltaChannel, writes: Any) -> None:
        calls["replay_writes"] += 1
        return original(self, writes)

    monkeypatch.setattr(DeltaChannel, "replay_writes", counting)
    return calls


def test_one_batched_delta_fetch_per_read_on_the_fixture(sqlite_fixture_db, monkeypatch):
    """Delta checkpoints whose messages are absent: exactly one saver call each; stored ones: none."""
    threads = manifest_threads()
    replays = _replay_counter(monkeypatch)
    with open_checkpointer(sqlite_fixture_db) as saver:
        calls = count_calls(saver, "get_delta_channel_history", "get_tuple", "list")
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
        seen = Counter()
        for thread_id in ("delta-f10-11t", "full-short-3t", "migrated-full20-delta20"):
            for cp in threads[thread_id]["backends"]["sqlite"]["checkpoints"]:
                calls.clear()
                replays.clear()
                snapshot = accessor.get(config_for(thread_id, cp["checkpoint_id"], cp["checkpoint_ns"]))
                assert messages_sha256(snapshot.values.get("messages", [])) == cp["messages_sha256"]
                needs_replay = cp["messages_stored"] == "absent" and cp["message_count"] > 0
                assert calls["get_tuple"] == 1 and calls["list"] == 0
                assert calls["get_delta_channel_history"] == (1 if needs_replay else 0), cp
                assert replays["replay_writes"] == (1 if needs_replay else 0)
                seen[(cp["messages_stored"], needs_replay)] += 1
        assert seen[("absent", True)] >= 100 and seen[("plain", False)] >= 80 and seen[("delta_snapshot", False)] >= 6


class TwoDeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(merge_message_writes, snapshot_frequency=50)]
    notes: Annotated[list[AnyMessage], DeltaChannel(merge_message_writes, snapshot_frequency=50)]
    title: str


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_delta_channels_absent_from_channel_values_are_batched_into_one_call(backend, tmp_path):
    """Two delta channels to rebuild -> one get_delta_channel_history call naming both."""
    def node(state: dict[str, Any]) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"a{n}", id=f"a{n}")], "notes": [AIMessage(f"n{n}", id=f"n{n}")]}

    with database_for(backend, tmp_path) as database, open_checkpointer(database, create=True) as saver:
        builder = StateGraph(TwoDeltaState)
        builder.add_node("agent", node)
        builder.add_edge(START, "agent")
        graph = builder.compile(checkpointer=saver)
        for turn in range(3):
            graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"q{turn}")]}, config_for("two"))
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta", state_schema=TwoDeltaState)
        requested: list[list[str]] = []
        original = saver.get_delta_channel_history

        def recording(*, config: Any, channels: Any) -> Any:
            requested.append(sorted(channels))
            return original(config=config, channels=channels)

        saver.get_delta_channel_history = recording
        head = accessor.get(config_for("two"))
        assert requested == [["messages", "notes"]]
        assert [m.id for m in head.values["messages"]] == ["q0", "a1", "q1", "a3", "q2", "a5"]
        assert [m.id for m in head.values["notes"]] == ["n1", "n3", "n5"]


def test_full_checkpoint_reads_make_no_delta_fetch():
    saver = InMemorySaver()
    graph = build_agent_graph("full", saver, tool_every=2)
    for turn in (1, 2, 3):
        run_turn(graph, "plain", "full", turn)
    calls = count_calls(saver, "get_delta_channel_history", "aget_delta_channel_history")
    for mode in ("full", "delta"):
        accessor = CheckpointStateAccessor.for_saver(saver, mode=mode)
        snapshots = accessor.history(config_for("plain"))
        for s in snapshots:
            accessor.get(s.config)
            asyncio.run(accessor.aget(s.config))
    assert sum(calls.values()) == 0
    # the asymmetric gate: a delta-mode accessor reads full checkpoints exactly like a full one
    full = [digest_of(s) for s in CheckpointStateAccessor.for_saver(saver, mode="full").history(config_for("plain"))]
    delta = [digest_of(s) for s in CheckpointStateAccessor.for_saver(saver, mode="delta").history(config_for("plain"))]
    assert full == delta and len(full) > 10


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_first_overwrite_of_an_optional_reducer_channel_reads_back_as_its_value(mode):
    """LangGraph stores the first value of a default-less reducer channel verbatim; the
    accessor must not let a DeerFlow-style ``Overwrite`` land in state as an object."""
    from langgraph.types import Overwrite as _Overwrite

    saver = _seeded(mode, turns=1)
    accessor = CheckpointStateAccessor.for_saver(saver, mode=mode)
    first = {"todos": _Overwrite([{"content": "a"}]), "goal": _Overwrite({"text": "g"}),
             "sandbox": _Overwrite({"sandbox_id": "s"}), "promoted": _Overwrite({"catalog_hash": "h", "names": ["n"]})}
    accessor.update(config_for("acc"), first, as_node="manual_state_update")
    values = accessor.get(config_for("acc")).values
    assert values["todos"] == [{"content": "a"}] and values["goal"] == {"text": "g"}
    assert values["sandbox"] == {"sandbox_id": "s"} and values["promoted"] == {"catalog_hash": "h", "names": ["n"]}
    # afterwards Overwrite replaces (sandbox would otherwise raise on a conflicting id)
    asyncio.run(accessor.aupdate(config_for("acc"),
                                 {"todos": _Overwrite([]), "sandbox": _Overwrite({"sandbox_id": "t"})},
                                 as_node="manual_state_update"))
    values = asyncio.run(accessor.aget(config_for("acc"))).values
    assert values["todos"] == [] and values["sandbox"] == {"sandbox_id": "t"}
    # a fork from before the first write is again a first write, async included
    oldest_with_messages = accessor.history(config_for("acc"))[-2].config
    forked = asyncio.run(accessor.aupdate(oldest_with_messages, {"todos": _Overwrite([{"content": "f"}])},
                                          as_node="manual_state_update"))
    assert accessor.get(forked).values["todos"] == [{"content": "f"}]
