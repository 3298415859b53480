"""Spec, "Storage shape and read path" and "Marker contract", on real savers.

What lives where in each mode, when a ``_DeltaSnapshot`` is written (update
count or the supersteps bound), what a raw saver read returns, what one step
costs, and what the markers look like in stored metadata (including the
marker-less fallback and the full -> delta migration).
"""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langgraph._internal import _config as lg_config
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import START, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from langgraph.pregel import _checkpoint as lg_checkpoint
from typing_extensions import TypedDict

from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.convert.digest import messages_sha256
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    CheckpointModeMismatchError,
    checkpoint_tuple_uses_delta,
)
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.savers import open_checkpointer
from tests.backends import WITH_MEMORY
from tests.deerflow.support import (
    build_agent_graph,
    config_for,
    database_for,
    digest_of,
    run_turn,
)

BACKEND_PARAMS = WITH_MEMORY  # memory, sqlite, postgres (tests/backends.py)


def _oldest_first(saver: Any, thread_id: str) -> list[Any]:
    return list(reversed(list(saver.list(config_for(thread_id)))))


# -- where the message list lives; raw reads -----------------------------------------


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_full_mode_stores_the_whole_list_in_every_checkpoint(backend, tmp_path):
    with database_for(backend, tmp_path) as database, open_checkpointer(database, create=True) as saver:
        graph = build_agent_graph("full", saver, tool_every=2)
        for turn in range(1, 6):
            run_turn(graph, "full", "full", turn)
        accessor = CheckpointStateAccessor.for_saver(saver, mode="full")
        tuples = _oldest_first(saver, "full")
        assert len(tuples) > 15
        for t in tuples:
            raw = t.checkpoint["channel_values"].get("messages")
            materialized = accessor.get(t.config).values.get("messages", [])
            if "messages" not in t.checkpoint["channel_versions"]:
                assert raw is None and materialized == []
                continue
            # raw checkpointer read returns the stored value: the message list itself
            assert isinstance(raw, list) and all(isinstance(m, BaseMessage) for m in raw)
            assert messages_sha256(raw) == messages_sha256(materialized)
            assert CHECKPOINT_MODE_METADATA_KEY not in t.metadata
            assert "counters_since_delta_snapshot" not in t.metadata


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_delta_mode_raw_reads_see_sentinels_not_the_list(backend, tmp_path):
    with database_for(backend, tmp_path) as database, open_checkpointer(database, create=True) as saver:
        graph = build_agent_graph("delta", saver, snapshot_frequency=4, tool_every=2)
        for turn in range(1, 7):
            live = run_turn(graph, "delta", "delta", turn)
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
        tuples = _oldest_first(saver, "delta")
        kinds = {"absent": 0, "snapshot": 0}
        for t in tuples:
            raw = t.checkpoint["channel_values"].get("messages")
            snapshot = accessor.get(t.config)
            materialized = snapshot.values.get("messages", [])
            assert not isinstance(raw, list)  # never the plain message list
            if raw is None:
                kinds["absent"] += 1
            else:
                assert isinstance(raw, _DeltaSnapshot)
                kinds["snapshot"] += 1
                if (t.metadata.get("counters_since_delta_snapshot") is None
                        and "messages" in t.checkpoint["channel_versions"]):
                    # the checkpoint that took the snapshot stores the full list at that point
                    assert messages_sha256(raw.value) == messages_sha256(materialized)
            assert t.metadata[CHECKPOINT_MODE_METADATA_KEY] == "delta"
        assert kinds["absent"] > kinds["snapshot"] > 0
        head = accessor.get(config_for("delta"))
        assert messages_sha256(head.values["messages"]) == messages_sha256(live["messages"])


def test_snapshot_cadence_follows_the_update_count(tmp_path):
    """SQLite stores channel_values inline, so the snapshot shows only where it was taken.

    Walking oldest -> newest: the messages update count is the previous
    checkpoint's counter plus one if the step wrote ``messages``; a
    ``_DeltaSnapshot`` is stored exactly when it reaches ``snapshot_frequency``,
    and that checkpoint drops its counters.
    """
    for k in (1, 2, 3, 5):
        with database_for("sqlite", tmp_path / f"k{k}") as database, open_checkpointer(database, create=True) as saver:
            graph = build_agent_graph("delta", saver, snapshot_frequency=k, tool_every=3)
            for turn in range(1, 8):
                run_turn(graph, "cad", "delta", turn)
            tuples = _oldest_first(saver, "cad")
            snapshots = 0
            previous = None
            for t in tuples:
                raw = t.checkpoint["channel_values"].get("messages")
                counters = (t.metadata.get("counters_since_delta_snapshot") or {}).get("messages")
                if previous is None or "messages" not in t.checkpoint["channel_versions"]:
                    assert raw is None
                    previous = t
                    continue
                prev_updates = ((previous.metadata.get("counters_since_delta_snapshot") or {}).get("messages")
                                or [0, 0])[0]
                wrote = any(channel == "messages" for _, channel, _ in previous.pending_writes)
                updates = prev_updates + (1 if wrote else 0)
                if updates >= k:
                    assert isinstance(raw, _DeltaSnapshot), (k, t.metadata)
                    assert counters is None
                    snapshots += 1
                else:
                    assert raw is None, (k, t.metadata)
                    assert counters[0] == updates < k
                previous = t
            # 7 turns: 2 updates per turn plus 2 per tool round (turns 3 and 6)
            assert snapshots == 18 // k


def test_supersteps_bound_is_langgraphs_5000_and_forces_a_snapshot(monkeypatch, tmp_path):
    assert lg_config.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT == 5000
    channel = (StateGraph(get_thread_state_schema("delta", 10)).add_node("n", lambda s: {}).add_edge(START, "n")
               .compile().channels["messages"])
    channel = channel.from_checkpoint(_DeltaSnapshot([HumanMessage("x", id="x")]))
    versions = {"messages": 1}
    predicate = lg_checkpoint.delta_channels_to_snapshot
    assert predicate({"messages": channel}, {"messages": (9, 4999)}, versions) == set()
    assert predicate({"messages": channel}, {"messages": (10, 1)}, versions) == {"messages"}
    assert predicate({"messages": channel}, {"messages": (0, 5000)}, versions) == {"messages"}

    # end to end, with the bound lowered: a channel that stops receiving writes still snapshots
    monkeypatch.setattr(lg_checkpoint, "DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT", 4)
    with database_for("sqlite", tmp_path) as database, open_checkpointer(database, create=True) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta", snapshot_frequency=100)
        accessor.update(config_for("quiet"), {"messages": [HumanMessage("a", id="a")]}, as_node="manual_state_update")
        accessor.update(config_for("quiet"), {"messages": [AIMessage("b", id="b")]}, as_node="manual_state_update")
        for i in range(6):  # only the title changes from here on
            accessor.update(config_for("quiet"), {"title": f"t{i}"}, as_node="manual_state_update")
        stored = [type(t.checkpoint["channel_values"].get("messages")).__name__ for t in _oldest_first(saver, "quiet")]
        counters = [(t.metadata.get("counters_since_delta_snapshot") or {}).get("messages")
                    for t in _oldest_first(saver, "quiet")]
        # first write of a fresh thread snapshots; then supersteps count up to the bound of 4
        assert stored == ["_DeltaSnapshot", "NoneType", "NoneType", "NoneType",
                          "_DeltaSnapshot", "NoneType", "NoneType", "NoneType"]
        assert counters == [None, [1, 1], [1, 2], [1, 3], None, [0, 1], [0, 2], [0, 3]]
        assert [m.id for m in accessor.get(config_for("quiet")).values["messages"]] == ["a", "b"]


def _stored_message_copies(database: Any) -> tuple[int, int]:
    """(message objects stored in checkpoint rows, bytes of checkpoint rows) of a SQLite file."""
    from deerflow.storage.savers import open_checkpointer as _open

    copies = 0
    with _open(database) as saver:
        for thread in ("cost",):
            for t in saver.list(config_for(thread)):
                raw = t.checkpoint["channel_values"].get("messages")
                if isinstance(raw, _DeltaSnapshot):
                    raw = raw.value
                copies += len(raw or [])
    with sqlite3.connect(str(database.sqlite_path())) as conn:
        size = conn.execute("SELECT sum(length(checkpoint)) FROM checkpoints").fetchone()[0]
    return copies, size


def test_step_cost_full_is_quadratic_delta_is_divided_by_k(tmp_path):
    """N turns, 2 message updates each: full retains sum(len) copies; delta one list per K updates."""
    n, k = 30, 10
    results = {}
    for mode in ("full", "delta"):
        with database_for("sqlite", tmp_path / mode) as database:
            with open_checkpointer(database, create=True) as saver:
                graph = build_agent_graph(mode, saver, snapshot_frequency=k)
                for turn in range(1, n + 1):
                    run_turn(graph, "cost", mode, turn)
            results[mode] = _stored_message_copies(database)
    # full: every checkpoint after the first repeats the whole list; per turn the list is 2t-2 at
    # the input checkpoint, 2t-1 after the human message is applied and 2t after the answer
    full_expected = sum((2 * t - 2) + (2 * t - 1) + 2 * t for t in range(1, n + 1))
    assert results["full"][0] == full_expected == 2700  # O(N^2)
    # delta: one snapshot per K updates, each holding the list at that point (10, 20, ... 60)
    assert results["delta"][0] == sum(range(k, 2 * n + 1, k)) == 210  # O(N^2 / K)
    assert results["delta"][1] * 4 < results["full"][1]  # and in bytes


# -- markers --------------------------------------------------------------------


class MarkerlessState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=3)]


def test_markerless_delta_thread_is_detected_through_counters_only(tmp_path):
    """A plain LangGraph DeltaChannel graph, no DeerFlow marker (the fixture's marker-less case)."""
    def agent(state: dict[str, Any]) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"a{n}", id=f"a{n}")]}

    with database_for("sqlite", tmp_path) as database, open_checkpointer(database, create=True) as saver:
        builder = StateGraph(MarkerlessState)
        builder.add_node("agent", agent)
        builder.add_edge(START, "agent")
        graph = builder.compile(checkpointer=saver)
        for turn in range(5):
            graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"q{turn}")]}, config_for("ml"))
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        delta = CheckpointStateAccessor.for_saver(saver, mode="delta")
        refused = read = 0
        for t in _oldest_first(saver, "ml"):
            assert CHECKPOINT_MODE_METADATA_KEY not in t.metadata
            has_counters = "messages" in (t.metadata.get("counters_since_delta_snapshot") or {})
            assert checkpoint_tuple_uses_delta(t) is has_counters
            expected = delta.get(t.config).values.get("messages", [])
            if has_counters:
                with pytest.raises(CheckpointModeMismatchError):
                    full.get(t.config)
                refused += 1
            else:
                # spec-exact weakness: snapshot checkpoints drop the counters, so the gate does not fire;
                # LangGraph 1.2.24 at least hands a full reader the unwrapped list
                values = full.get(t.config).values.get("messages", [])
                assert isinstance(values, list)
                assert messages_sha256(values) == messages_sha256(expected)
                read += 1
        assert refused > read > 1


def test_pre_feature_full_checkpoints_need_no_migration(tmp_path):
    """A thread written by plain LangGraph (no DeerFlow, no marker) reads in both modes."""
    with database_for("sqlite", tmp_path) as database, open_checkpointer(database, create=True) as saver:
        graph = build_agent_graph("full", saver, tool_every=2)
        for turn in (1, 2, 3):
            graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h-{turn}")]}, config_for("legacy"))
        full = CheckpointStateAccessor.for_saver(saver, mode="full").history(config_for("legacy"))
        delta = CheckpointStateAccessor.for_saver(saver, mode="delta").history(config_for("legacy"))
        assert [digest_of(s) for s in full] == [digest_of(s) for s in delta]
        assert all(CHECKPOINT_MODE_METADATA_KEY not in s.metadata for s in full)
        assert digest_of(full[0])[0] == 8


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_full_to_delta_migration(backend, tmp_path):
    """Full turns, then the same thread continued by a delta process: the supported migration."""
    with database_for(backend, tmp_path) as database, open_checkpointer(database, create=True) as saver:
        full_graph = build_agent_graph("full", saver, tool_every=2)
        delta_graph = build_agent_graph("delta", saver, snapshot_frequency=3, tool_every=2)
        for turn in range(1, 5):
            run_turn(full_graph, "mig", "full", turn)
            run_turn(full_graph, "ref", "full", turn)
        for turn in range(5, 9):
            live = run_turn(delta_graph, "mig", "delta", turn)
            run_turn(full_graph, "ref", "full", turn)
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        delta = CheckpointStateAccessor.for_saver(saver, mode="delta")
        migrated = delta.history(config_for("mig"))
        reference = full.history(config_for("ref"))
        assert [digest_of(s) for s in migrated] == [digest_of(s) for s in reference]
        assert messages_sha256(migrated[0].values["messages"]) == messages_sha256(live["messages"])
        full_era = delta_era = 0
        for s in migrated:
            if s.metadata.get(CHECKPOINT_MODE_METADATA_KEY) == "delta":
                delta_era += 1
                with pytest.raises(CheckpointModeMismatchError):
                    full.get(s.config)
            else:
                full_era += 1
                assert digest_of(full.get(s.config)) == digest_of(s)
        assert full_era > 10 and delta_era > 10


def test_cadence_is_not_stamped_and_reads_do_not_depend_on_it(tmp_path):
    """Cross-process invariant: a cadence mismatch is undetectable, and reading does not need it."""
    with database_for("sqlite", tmp_path) as database, open_checkpointer(database, create=True) as saver:
        graph = build_agent_graph("delta", saver, snapshot_frequency=3, tool_every=2)
        for turn in range(1, 7):
            run_turn(graph, "k3", "delta", turn)
        tuples = list(saver.list(config_for("k3")))
        assert not any("frequency" in key or "cadence" in key for t in tuples for key in t.metadata)
        readings = [
            [digest_of(s) for s in CheckpointStateAccessor.for_saver(saver, mode="delta", snapshot_frequency=k)
             .history(config_for("k3"))]
            for k in (1, 3, 10, 25)
        ]
        assert readings[0] == readings[1] == readings[2] == readings[3]
        # and a process at another cadence keeps writing without any error
        other = build_agent_graph("delta", saver, snapshot_frequency=25, tool_every=2)
        live = run_turn(other, "k3", "delta", 7)
        head = CheckpointStateAccessor.for_saver(saver, mode="delta").get(config_for("k3")).values["messages"]
        assert len(head) == 7 * 2 + 3 * 2  # 7 turns, tool rounds on turns 2, 4 and 6
        assert messages_sha256(head) == messages_sha256(live["messages"])
