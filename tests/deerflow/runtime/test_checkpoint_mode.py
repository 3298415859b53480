"""deerflow.runtime.checkpoint_mode: freeze, cadence, marker injection, detection and gates.

Spec: "Marker contract", "The fail-closed gate", "Cross-process invariant"
(the freeze is module-global per process), "HTTP error mapping" (messages).
"""

from __future__ import annotations

import asyncio
import copy
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import StateSnapshot

from deerflow.errors import (
    MISMATCH_MESSAGE,
    RECONFIGURATION_MESSAGE,
    SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE,
)
from deerflow.runtime import checkpoint_mode as cm
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    INTERNAL_CHECKPOINT_MODE_KEY,
    CheckpointModeMismatchError,
    CheckpointModeReconfigurationError,
    aensure_checkpoint_mode_compatible,
    checkpoint_metadata_uses_delta,
    checkpoint_tuple_uses_delta,
    copy_config,
    ensure_checkpoint_mode_compatible,
    freeze_checkpoint_channel_mode,
    freeze_checkpoint_snapshot_frequency,
    frozen_checkpoint_channel_mode,
    frozen_checkpoint_snapshot_frequency,
    inject_checkpoint_mode,
    raise_if_checkpoint_tuple_incompatible,
    raise_if_snapshot_incompatible,
    resolve_checkpoint_snapshot_frequency,
    state_snapshot_uses_delta,
)
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.support import config_for

# -- spec strings -------------------------------------------------------------


def test_spec_constants_and_messages_are_exact():
    assert CHECKPOINT_MODE_METADATA_KEY == "deerflow_checkpoint_channel_mode"
    assert INTERNAL_CHECKPOINT_MODE_KEY == "__deerflow_checkpoint_channel_mode"
    assert cm.COUNTERS_METADATA_KEY == "counters_since_delta_snapshot"
    assert cm.DEFAULT_SNAPSHOT_FREQUENCY == 10
    assert MISMATCH_MESSAGE == (
        "Thread requires delta mode; materialize and convert its checkpoints before using full mode."
    )
    assert RECONFIGURATION_MESSAGE == (
        "checkpoint_channel_mode is restart-required and cannot change in a running process"
    )
    assert SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE == (
        "checkpoint_delta.snapshot_frequency is restart-required and cannot change in a running process"
    )


def test_error_details_for_http_mapping():
    mismatch = CheckpointModeMismatchError(thread_id="thread-7")
    assert str(mismatch) == MISMATCH_MESSAGE
    assert mismatch.detail == f"Thread thread-7: {MISMATCH_MESSAGE}"
    assert CheckpointModeMismatchError().detail == MISMATCH_MESSAGE
    reconf = CheckpointModeReconfigurationError()
    assert reconf.detail == RECONFIGURATION_MESSAGE
    twin = CheckpointModeReconfigurationError(SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE,
                                              setting="checkpoint_delta.snapshot_frequency")
    assert twin.detail == SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE
    # both are RuntimeErrors like DeerFlow's own classes
    assert isinstance(mismatch, RuntimeError) and isinstance(reconf, RuntimeError)


# -- mode freeze ----------------------------------------------------------------


def test_mode_freeze_is_idempotent_and_refuses_another_value():
    assert frozen_checkpoint_channel_mode() is None
    assert freeze_checkpoint_channel_mode("delta") == "delta"
    assert frozen_checkpoint_channel_mode() == "delta"
    assert freeze_checkpoint_channel_mode("delta") == "delta"  # idempotent
    with pytest.raises(CheckpointModeReconfigurationError) as info:
        freeze_checkpoint_channel_mode("full")
    assert str(info.value) == RECONFIGURATION_MESSAGE
    assert (info.value.frozen, info.value.requested, info.value.setting) == ("delta", "full", "checkpoint_channel_mode")
    assert frozen_checkpoint_channel_mode() == "delta"  # unchanged by the refused call


@pytest.mark.parametrize("bad", ["Delta", "", None, "fast", 1])
def test_unknown_mode_raises_value_error_and_freezes_nothing(bad):
    with pytest.raises(ValueError, match="checkpoint_channel_mode must be one of 'full', 'delta'"):
        freeze_checkpoint_channel_mode(bad)
    assert frozen_checkpoint_channel_mode() is None
    assert freeze_checkpoint_channel_mode("full") == "full"


def test_cadence_freeze_is_idempotent_and_refuses_another_value():
    assert frozen_checkpoint_snapshot_frequency() is None
    assert freeze_checkpoint_snapshot_frequency(25) == 25
    assert freeze_checkpoint_snapshot_frequency(25) == 25
    with pytest.raises(CheckpointModeReconfigurationError) as info:
        freeze_checkpoint_snapshot_frequency(10)
    assert str(info.value) == SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE
    assert (info.value.frozen, info.value.requested) == (25, 10)
    assert info.value.setting == "checkpoint_delta.snapshot_frequency"
    assert frozen_checkpoint_snapshot_frequency() == 25


@pytest.mark.parametrize("bad", [0, -1, -10, True, False, 2.0, "10", None, 1.5])
def test_bad_cadence_raises_value_error_before_anything_is_frozen(bad):
    with pytest.raises(ValueError, match="snapshot frequency must be positive") as info:
        freeze_checkpoint_snapshot_frequency(bad)
    assert not isinstance(info.value, CheckpointModeReconfigurationError)
    assert frozen_checkpoint_snapshot_frequency() is None
    # a later valid freeze still works: nothing was half-frozen
    assert freeze_checkpoint_snapshot_frequency(3) == 3


def test_bad_cadence_after_freeze_is_still_a_value_error():
    freeze_checkpoint_snapshot_frequency(5)
    with pytest.raises(ValueError) as info:
        freeze_checkpoint_snapshot_frequency(0)
    assert not isinstance(info.value, CheckpointModeReconfigurationError)
    assert frozen_checkpoint_snapshot_frequency() == 5


def test_resolve_cadence_explicit_then_frozen_then_default():
    assert resolve_checkpoint_snapshot_frequency() == 10
    assert resolve_checkpoint_snapshot_frequency(None) == 10
    assert resolve_checkpoint_snapshot_frequency(7) == 7
    freeze_checkpoint_snapshot_frequency(4)
    assert resolve_checkpoint_snapshot_frequency() == 4
    assert resolve_checkpoint_snapshot_frequency(7) == 7  # explicit wins over frozen
    for bad in (0, -3, True, "4"):
        with pytest.raises(ValueError):
            resolve_checkpoint_snapshot_frequency(bad)


def test_freeze_is_per_process_each_process_freezes_independently():
    """Cross-process invariant: nothing reconciles two processes; each freezes its own value."""
    code = (
        "import sys\n"
        "from deerflow.runtime.checkpoint_mode import freeze_checkpoint_channel_mode as f, "
        "freeze_checkpoint_snapshot_frequency as g\n"
        "print(f(sys.argv[1]), g(int(sys.argv[2])))\n"
        "try:\n    f('full' if sys.argv[1] == 'delta' else 'delta')\n"
        "except Exception as e:\n    print(type(e).__name__)\n"
    )
    outs = [
        subprocess.run([sys.executable, "-c", code, mode, str(k)], capture_output=True, text=True, check=True,
                       cwd=str(_repo_root())).stdout.split()
        for mode, k in (("delta", 3), ("full", 10))
    ]
    assert outs == [["delta", "3", "CheckpointModeReconfigurationError"],
                    ["full", "10", "CheckpointModeReconfigurationError"]]
    # and this process is untouched by them
    assert frozen_checkpoint_channel_mode() is None


def _repo_root():
    from pathlib import Path

    return Path(__file__).resolve().parents[3]


# -- inject_checkpoint_mode -----------------------------------------------------


def test_inject_writes_into_the_given_config_in_place_delta():
    """DeerFlow's contract: the config passed in carries the marker afterwards."""
    configurable = {"thread_id": "t1", "checkpoint_ns": ""}
    metadata = {"run_id": "r1"}
    config = {"configurable": configurable, "metadata": metadata, "tags": ["a"]}
    out = inject_checkpoint_mode(config, "delta")
    assert out is config
    assert config["configurable"] is configurable and config["metadata"] is metadata  # the same dicts, changed
    assert configurable == {"thread_id": "t1", "checkpoint_ns": "", INTERNAL_CHECKPOINT_MODE_KEY: "delta"}
    assert metadata == {"run_id": "r1", CHECKPOINT_MODE_METADATA_KEY: "delta"}
    assert config["tags"] == ["a"]


def test_inject_creates_missing_sections_in_place():
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    inject_checkpoint_mode(config, "delta")
    assert config["metadata"] == {CHECKPOINT_MODE_METADATA_KEY: "delta"}
    assert config["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] == "delta"


def test_inject_full_removes_the_marker_in_place_and_sets_internal_key():
    config = {"configurable": {"thread_id": "t1"}, "metadata": {CHECKPOINT_MODE_METADATA_KEY: "delta", "x": 1}}
    inject_checkpoint_mode(config, "full")
    assert config["metadata"] == {"x": 1}
    assert config["configurable"] == {"thread_id": "t1", INTERNAL_CHECKPOINT_MODE_KEY: "full"}


def test_copy_config_then_inject_leaves_the_callers_dicts_untouched():
    config = {"configurable": {"thread_id": "t1"}, "metadata": {"x": 1}, "tags": ["a"]}
    before = copy.deepcopy(config)
    out = inject_checkpoint_mode(copy_config(config), "delta")
    assert config == before
    assert out["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] == "delta" and out["tags"] == ["a"]


def test_inject_accepts_none_and_missing_sections():
    out = inject_checkpoint_mode(None, "delta")
    assert out == {"configurable": {INTERNAL_CHECKPOINT_MODE_KEY: "delta"},
                   "metadata": {CHECKPOINT_MODE_METADATA_KEY: "delta"}}
    out = inject_checkpoint_mode({"configurable": None, "metadata": None}, "full")
    assert out == {"configurable": {INTERNAL_CHECKPOINT_MODE_KEY: "full"}, "metadata": {}}


def test_inject_defaults_to_the_frozen_mode_and_needs_one():
    with pytest.raises(ValueError, match="none frozen"):
        inject_checkpoint_mode({"configurable": {"thread_id": "t"}})
    freeze_checkpoint_channel_mode("delta")
    out = inject_checkpoint_mode({"configurable": {"thread_id": "t"}})
    assert out["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] == "delta"
    assert out["metadata"][CHECKPOINT_MODE_METADATA_KEY] == "delta"
    with pytest.raises(ValueError):
        inject_checkpoint_mode({}, "bogus")


def test_inject_ignores_a_caller_supplied_internal_key_before_the_freeze():
    config = {"configurable": {"thread_id": "t", INTERNAL_CHECKPOINT_MODE_KEY: "full"}}
    inject_checkpoint_mode(config, "delta")
    assert config["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] == "delta"
    assert frozen_checkpoint_channel_mode() is None  # injecting never freezes


def test_inject_rejects_a_caller_supplied_internal_key_that_differs_from_the_frozen_mode():
    freeze_checkpoint_channel_mode("full")
    config = {"configurable": {"thread_id": "t", INTERNAL_CHECKPOINT_MODE_KEY: "delta"}}
    before = copy.deepcopy(config)
    with pytest.raises(CheckpointModeReconfigurationError) as info:
        inject_checkpoint_mode(config)
    assert str(info.value) == RECONFIGURATION_MESSAGE
    assert (info.value.frozen, info.value.requested) == ("full", "delta")
    assert config == before
    # the same value as the frozen mode is accepted
    same = inject_checkpoint_mode({"configurable": {"thread_id": "t", INTERNAL_CHECKPOINT_MODE_KEY: "full"}})
    assert same["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] == "full"


def test_accessor_rejects_a_caller_supplied_internal_key_once_frozen():
    freeze_checkpoint_channel_mode("full")
    accessor = CheckpointStateAccessor.for_saver(InMemorySaver(), mode="full")
    config = config_for("t")
    config["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] = "delta"
    with pytest.raises(CheckpointModeReconfigurationError):
        accessor.get(config)
    with pytest.raises(CheckpointModeReconfigurationError):
        asyncio.run(accessor.aget(config))


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_internal_key_never_reaches_stored_metadata(mode, tmp_path):
    """Write through a real graph with the injected config; inspect the saver's stored metadata."""
    from deerflow.config.database_config import DatabaseConfig
    from deerflow.storage.savers import open_checkpointer
    from tests.deerflow.support import build_agent_graph, run_turn

    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path))
    with open_checkpointer(database, create=True) as saver:
        graph = build_agent_graph(mode, saver, tool_every=2)
        for turn in (1, 2):
            run_turn(graph, "t-meta", mode, turn)
        # also a caller that brings a stale marker in metadata and the internal key
        stale = {"configurable": {"thread_id": "t-meta", INTERNAL_CHECKPOINT_MODE_KEY: mode},
                 "metadata": {CHECKPOINT_MODE_METADATA_KEY: "delta", "origin": "test"}}
        graph.invoke({"messages": [HumanMessage("again", id="h-x")]}, inject_checkpoint_mode(stale, mode))
        tuples = list(saver.list(config_for("t-meta")))
    assert len(tuples) > 8
    for t in tuples:
        assert INTERNAL_CHECKPOINT_MODE_KEY not in t.metadata
        assert not any(str(k).startswith("__") for k in t.metadata)
        assert INTERNAL_CHECKPOINT_MODE_KEY not in t.config["configurable"]
        if mode == "delta":
            assert t.metadata[CHECKPOINT_MODE_METADATA_KEY] == "delta"
        else:
            assert CHECKPOINT_MODE_METADATA_KEY not in t.metadata
    # the cadence is deliberately not stamped
    assert not any("snapshot_frequency" in str(k) for t in tuples for k in t.metadata)


# -- detection ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        (None, False),
        ({}, False),
        ({"source": "loop", "step": 3}, False),
        ({CHECKPOINT_MODE_METADATA_KEY: "delta"}, True),
        ({CHECKPOINT_MODE_METADATA_KEY: "full"}, False),
        ({CHECKPOINT_MODE_METADATA_KEY: "DELTA"}, False),
        ({"counters_since_delta_snapshot": {"messages": [1, 2]}}, True),  # counters-only evidence
        ({"counters_since_delta_snapshot": {"messages": (0, 1)}}, True),
        ({"counters_since_delta_snapshot": {"other": [1, 1]}}, False),
        ({"counters_since_delta_snapshot": {}}, False),
        ({"counters_since_delta_snapshot": None}, False),
        ({"counters_since_delta_snapshot": ["messages"]}, False),
        ({CHECKPOINT_MODE_METADATA_KEY: "delta", "counters_since_delta_snapshot": {"messages": [1, 1]}}, True),
    ],
)
def test_metadata_detection(metadata, expected):
    assert checkpoint_metadata_uses_delta(metadata) is expected
    tuple_ = None if metadata is None else CheckpointTuple(config=config_for("t"), checkpoint={}, metadata=metadata)
    assert checkpoint_tuple_uses_delta(tuple_) is (expected if tuple_ is not None else False)
    snapshot = None if metadata is None else _snapshot(metadata)
    assert state_snapshot_uses_delta(snapshot) is (expected if snapshot is not None else False)


def test_detection_of_none_is_false():
    assert checkpoint_tuple_uses_delta(None) is False
    assert state_snapshot_uses_delta(None) is False
    assert state_snapshot_uses_delta(_snapshot(None)) is False  # empty thread: StateSnapshot(metadata=None)


def _snapshot(metadata: Any) -> StateSnapshot:
    return StateSnapshot(values={}, next=(), config=config_for("t-snap"), metadata=metadata,
                         created_at=None, parent_config=None, tasks=(), interrupts=())


# -- the three gates (pure part; real-saver part lives in test_gate_real_savers) --


def test_snapshot_gate_is_asymmetric():
    delta = _snapshot({CHECKPOINT_MODE_METADATA_KEY: "delta"})
    full = _snapshot({"step": 1})
    raise_if_snapshot_incompatible(delta, "delta")  # delta reads everything
    raise_if_snapshot_incompatible(full, "delta")
    raise_if_snapshot_incompatible(full, "full")
    raise_if_snapshot_incompatible(None, "full")
    with pytest.raises(CheckpointModeMismatchError) as info:
        raise_if_snapshot_incompatible(delta, "full")
    assert str(info.value) == MISMATCH_MESSAGE
    assert info.value.thread_id == "t-snap"
    assert info.value.detail == f"Thread t-snap: {MISMATCH_MESSAGE}"


def test_tuple_gate_is_asymmetric():
    delta = CheckpointTuple(config=config_for("t-tuple"), checkpoint={},
                            metadata={"counters_since_delta_snapshot": {"messages": [1, 1]}})
    full = CheckpointTuple(config=config_for("t-tuple"), checkpoint={}, metadata={"step": 0})
    raise_if_checkpoint_tuple_incompatible(delta, "delta")
    raise_if_checkpoint_tuple_incompatible(full, "full")
    raise_if_checkpoint_tuple_incompatible(None, "full")
    with pytest.raises(CheckpointModeMismatchError, match="^Thread requires delta mode; materialize") as info:
        raise_if_checkpoint_tuple_incompatible(delta, "full")
    assert info.value.thread_id == "t-tuple"


class _ExplodingSaver:
    """Any saver call fails the test: proves the delta fast path makes none."""

    def get_tuple(self, config):  # pragma: no cover - must not run
        raise AssertionError("get_tuple called in delta mode")

    async def aget_tuple(self, config):  # pragma: no cover - must not run
        raise AssertionError("aget_tuple called in delta mode")


def test_pre_write_gates_return_immediately_in_delta_mode():
    assert ensure_checkpoint_mode_compatible(_ExplodingSaver(), config_for("t"), "delta") is None
    assert asyncio.run(aensure_checkpoint_mode_compatible(_ExplodingSaver(), config_for("t"), "delta")) is None
    with pytest.raises(AssertionError, match="get_tuple called"):
        ensure_checkpoint_mode_compatible(_ExplodingSaver(), config_for("t"), "full")
    with pytest.raises(AssertionError, match="aget_tuple called"):
        asyncio.run(aensure_checkpoint_mode_compatible(_ExplodingSaver(), config_for("t"), "full"))


def test_pre_write_gate_on_a_missing_thread_lets_the_write_through():
    saver = InMemorySaver()
    assert ensure_checkpoint_mode_compatible(saver, config_for("nobody"), "full") is None
    assert asyncio.run(aensure_checkpoint_mode_compatible(saver, config_for("nobody"), "full")) is None
