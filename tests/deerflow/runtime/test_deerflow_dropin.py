"""DeerFlow's channel-mode API, as DeerFlow code calls it (issue 13, "A drop-in for DeerFlow's channel-mode API").

One test group per point of the issue: ``CheckpointStateAccessor.bind(graph,
checkpointer, *, store=None, mode="full")``; ``inject_checkpoint_mode`` writes
in place while the accessor copies; the frozen values live in DeerFlow's
module globals; a non-positive cadence raises DeerFlow's text; the gates take
any tuple with ``.metadata`` and ``.checkpoint``. Real graphs and savers
(SQLite on disk, Postgres) where a store is involved.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from types import SimpleNamespace

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Overwrite

from deerflow.errors import MISMATCH_MESSAGE
from deerflow.runtime import checkpoint_mode
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    INTERNAL_CHECKPOINT_MODE_KEY,
    CheckpointModeMismatchError,
    CheckpointModeReconfigurationError,
    aensure_checkpoint_mode_compatible,
    checkpoint_tuple_uses_delta,
    ensure_checkpoint_mode_compatible,
    freeze_checkpoint_channel_mode,
    freeze_checkpoint_snapshot_frequency,
    frozen_checkpoint_channel_mode,
    frozen_checkpoint_snapshot_frequency,
    inject_checkpoint_mode,
    raise_if_checkpoint_tuple_incompatible,
    raise_if_snapshot_incompatible,
    resolve_checkpoint_snapshot_frequency,
    validate_snapshot_frequency,
)
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor, build_state_mutation_graph
from deerflow.storage.savers import open_checkpointer
from tests.deerflow.support import config_for

# -- 1. bind(graph, checkpointer, *, store=None, mode="full") ------------------------------


def test_bind_has_deerflows_signature():
    params = inspect.signature(CheckpointStateAccessor.bind).parameters
    assert list(params) == ["graph", "checkpointer", "store", "mode"]
    assert params["graph"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert params["store"].kind is inspect.Parameter.KEYWORD_ONLY and params["store"].default is None
    assert params["mode"].kind is inspect.Parameter.KEYWORD_ONLY and params["mode"].default == "full"
    # the saver-based constructor keeps the old arguments under its own name
    assert list(inspect.signature(CheckpointStateAccessor.for_saver).parameters) == [
        "checkpointer", "mode", "snapshot_frequency", "state_schema", "as_node"]


def _bind_and_round_trip(saver, mode: str, thread_id: str) -> None:
    graph = build_state_mutation_graph("seed", mode)
    assert graph.checkpointer is None
    store = InMemoryStore()
    accessor = CheckpointStateAccessor.bind(graph, saver, store=store, mode=mode)
    assert accessor.graph is graph and accessor.checkpointer is saver and accessor.mode == mode
    assert graph.checkpointer is saver and graph.store is store
    config = config_for(thread_id)
    accessor.update(config, {"messages": Overwrite([HumanMessage("hi", id="h1")])}, as_node="seed")
    accessor.update(config, {"messages": [HumanMessage("again", id="h2")]}, as_node="seed")
    assert [m.id for m in accessor.get(config).values["messages"]] == ["h1", "h2"]
    assert [len(s.values["messages"]) for s in accessor.history(config)] == [2, 1]
    stored = saver.get_tuple(config)
    assert (stored.metadata.get(CHECKPOINT_MODE_METADATA_KEY) == "delta") is (mode == "delta")


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_bind_sets_the_graphs_checkpointer_and_store_on_sqlite(tmp_path, mode):
    with SqliteSaver.from_conn_string(str(tmp_path / "bind.db")) as saver:
        saver.setup()
        _bind_and_round_trip(saver, mode, f"bind-{mode}")


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["full", "delta"])
def test_bind_sets_the_graphs_checkpointer_and_store_on_postgres(empty_postgres_db, mode):
    with open_checkpointer(empty_postgres_db, create=True) as saver:
        _bind_and_round_trip(saver, mode, f"bind-{mode}")


def test_bind_defaults_to_full_keeps_the_store_when_none_and_refuses_a_bad_mode():
    graph = build_state_mutation_graph("seed", "full")
    earlier = InMemoryStore()
    graph.store = earlier
    freeze_checkpoint_channel_mode("delta")  # bind's default is DeerFlow's "full", not the frozen mode
    saver = InMemorySaver()
    assert CheckpointStateAccessor.bind(graph, saver).mode == "full"
    assert graph.store is earlier
    other = build_state_mutation_graph("seed", "full")
    with pytest.raises(ValueError, match="checkpoint_channel_mode must be one of"):
        CheckpointStateAccessor.bind(other, saver, mode="half")
    assert other.checkpointer is None  # nothing was changed
    # DeerFlow's accessor is a dataclass(graph, checkpointer, mode): positional mode works
    assert CheckpointStateAccessor(graph, saver, "delta").mode == "delta"


def test_bind_a_graph_that_takes_no_paging_keywords():
    """DeerFlow code may bind any object with LangGraph's graph methods; history passes only what it is given."""
    calls = []

    class BareGraph:
        def get_state_history(self, config, *, limit=None):
            calls.append(limit)
            for index in range(5):  # ignores limit on purpose: the accessor stops at it
                yield SimpleNamespace(values={"index": index}, metadata={})

    accessor = CheckpointStateAccessor.bind(BareGraph(), InMemorySaver())
    assert [s.values["index"] for s in accessor.history(config_for("t"), limit=2)] == [0, 1]
    assert [s.values["index"] for s in accessor.history(config_for("t"))] == [0, 1, 2, 3, 4]
    assert accessor.history(config_for("t"), limit=0) == [] and calls == [2, None]


# -- 2. inject_checkpoint_mode writes in place; the accessor copies ------------------------


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_inject_writes_configurable_and_metadata_in_place(mode):
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}, "metadata": {CHECKPOINT_MODE_METADATA_KEY: "x"}}
    configurable, metadata = config["configurable"], config["metadata"]
    inject_checkpoint_mode(config, mode)
    assert config["configurable"] is configurable and config["metadata"] is metadata
    assert configurable[INTERNAL_CHECKPOINT_MODE_KEY] == mode
    assert metadata.get(CHECKPOINT_MODE_METADATA_KEY) == ("delta" if mode == "delta" else None)


def test_the_accessor_copies_before_injecting():
    saver = InMemorySaver()  # sync and async on one real saver
    accessor = CheckpointStateAccessor.bind(build_state_mutation_graph("seed", "delta"), saver, mode="delta")
    config = {"configurable": {"thread_id": "c", "checkpoint_ns": ""}, "metadata": {"caller": 1}, "tags": ["x"]}
    pristine = copy.deepcopy(config)
    accessor.update(config, {"messages": Overwrite([HumanMessage("hi", id="h1")])}, as_node="seed")
    asyncio.run(accessor.aupdate(config, {"messages": [HumanMessage("two", id="h2")]}, as_node="seed"))
    assert [m.id for m in accessor.get(config).values["messages"]] == ["h1", "h2"]
    accessor.history(config, limit=1)
    accessor.get_metadata(config)
    asyncio.run(_async_reads(accessor, config))
    assert config == pristine
    prepared = accessor.prepare_config(config)
    assert prepared["configurable"] is not config["configurable"]
    assert prepared["metadata"] is not config["metadata"]
    assert prepared["metadata"][CHECKPOINT_MODE_METADATA_KEY] == "delta"
    assert saver.get_tuple(config).metadata[CHECKPOINT_MODE_METADATA_KEY] == "delta"


async def _async_reads(accessor, config):
    await accessor.aget(config)
    await accessor.ahistory(config)


# -- 3. the frozen values live in DeerFlow's module globals ----------------------------------


def test_frozen_values_are_deerflows_module_globals(monkeypatch):
    assert freeze_checkpoint_channel_mode("full") == "full"
    assert checkpoint_mode._frozen_checkpoint_channel_mode == "full"
    assert freeze_checkpoint_snapshot_frequency(250) == 250
    assert checkpoint_mode._frozen_checkpoint_snapshot_frequency == 250
    # DeerFlow's tests reset them by name; every reader sees the reset at once
    monkeypatch.setattr(checkpoint_mode, "_frozen_checkpoint_channel_mode", None)
    monkeypatch.setattr(checkpoint_mode, "_frozen_checkpoint_snapshot_frequency", None)
    assert frozen_checkpoint_channel_mode() is None and frozen_checkpoint_snapshot_frequency() is None
    assert resolve_checkpoint_snapshot_frequency() == 10
    assert freeze_checkpoint_channel_mode("delta") == "delta"  # a new freeze is allowed after the reset
    monkeypatch.setattr(checkpoint_mode, "_frozen_checkpoint_snapshot_frequency", 40)
    assert resolve_checkpoint_snapshot_frequency() == 40
    assert resolve_checkpoint_snapshot_frequency(7) == 7
    with pytest.raises(CheckpointModeReconfigurationError, match="restart"):
        freeze_checkpoint_snapshot_frequency(41)
    assert not hasattr(checkpoint_mode, "_frozen_mode") and not hasattr(checkpoint_mode, "_frozen_frequency")


# -- 4. a non-positive cadence ----------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, -250])
def test_a_non_positive_cadence_raises_deerflows_text(bad):
    for call in (freeze_checkpoint_snapshot_frequency, validate_snapshot_frequency,
                 resolve_checkpoint_snapshot_frequency):
        with pytest.raises(ValueError, match="snapshot frequency must be positive") as info:
            call(bad)
        assert repr(bad) in str(info.value)
    with pytest.raises(ValueError, match="snapshot frequency must be positive"):
        CheckpointStateAccessor.for_saver(InMemorySaver(), mode="delta", snapshot_frequency=bad)
    assert frozen_checkpoint_snapshot_frequency() is None


# -- 5. the gates take any tuple with .metadata and .checkpoint --------------------------------


class _TupleSaver:
    """A checkpointer answering ``get_tuple`` with a bare tuple-like object (no ``.config``)."""

    def __init__(self, metadata):
        self.found = SimpleNamespace(metadata=metadata, checkpoint={"channel_values": {}})
        self.configs = []

    def get_tuple(self, config):
        self.configs.append(config)
        return self.found

    async def aget_tuple(self, config):
        self.configs.append(config)
        return self.found


@pytest.mark.parametrize("metadata", [{CHECKPOINT_MODE_METADATA_KEY: "delta"},
                                      {"counters_since_delta_snapshot": {"messages": 1}}])
def test_the_gates_accept_a_tuple_without_config(metadata):
    found = SimpleNamespace(metadata=metadata, checkpoint={"channel_values": {}})
    assert checkpoint_tuple_uses_delta(found)
    for gate in (raise_if_checkpoint_tuple_incompatible, raise_if_snapshot_incompatible):
        with pytest.raises(CheckpointModeMismatchError, match="requires delta mode") as info:
            gate(found, "full")
        assert str(info.value) == MISMATCH_MESSAGE and info.value.thread_id is None
        gate(found, "delta")  # delta reads everything
    saver = _TupleSaver(metadata)
    with pytest.raises(CheckpointModeMismatchError) as info:
        ensure_checkpoint_mode_compatible(saver, config_for("gated"), "full")
    assert info.value.thread_id == "gated"  # taken from the config when the tuple has none
    with pytest.raises(CheckpointModeMismatchError):
        asyncio.run(aensure_checkpoint_mode_compatible(saver, config_for("gated"), "full"))
    accessor = CheckpointStateAccessor.bind(build_state_mutation_graph("seed", "full"), saver)
    with pytest.raises(CheckpointModeMismatchError):
        accessor.update(config_for("gated"), {"title": "x"}, as_node="seed")
    with pytest.raises(CheckpointModeMismatchError):
        accessor.get_metadata(config_for("gated"))


def test_the_gates_pass_full_tuples_and_objects_without_metadata():
    plain = SimpleNamespace(metadata={"step": 1}, checkpoint={"channel_values": {"messages": []}})
    raise_if_checkpoint_tuple_incompatible(plain, "full")
    raise_if_snapshot_incompatible(SimpleNamespace(values={}), "full")  # a bare snapshot reads as full
    ensure_checkpoint_mode_compatible(_TupleSaver({}), config_for("t"), "full")
    assert not checkpoint_tuple_uses_delta(SimpleNamespace(checkpoint={}))
