"""Each private LangGraph name in ``deerflow._langgraph_compat`` still means what the project assumes of it.

The CI runs this file at the minimum and at the newest LangGraph releases; a failure here names the
assumption a release broke before any reader silently misreads.
"""

from __future__ import annotations

import ast
from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite

from deerflow import _langgraph_compat as compat

REPO = Path(__file__).resolve().parents[2]


def test_delta_snapshot_wraps_its_value_and_round_trips_through_the_serializer():
    messages = [HumanMessage("hello", id="h1")]
    snapshot = compat._DeltaSnapshot(messages)
    assert snapshot.value == messages
    serde = JsonPlusSerializer()
    back = serde.loads_typed(serde.dumps_typed(snapshot))
    assert isinstance(back, compat._DeltaSnapshot)
    assert [m.content for m in back.value] == ["hello"]


def test_get_overwrite_unwraps_every_stored_overwrite_form():
    payload = [HumanMessage("x", id="x1")]
    assert compat._get_overwrite(Overwrite(payload)) == (True, payload)
    assert compat._get_overwrite({"__overwrite__": payload}) == (True, payload)
    assert compat._get_overwrite(payload) == (False, None)
    assert compat._get_overwrite({"value": 1}) == (False, None)


def test_missing_is_the_value_of_an_unwritten_binop_channel_without_a_zero_value():
    # DeerFlow's ``sandbox``, ``todos``, ``goal``: ``list | None`` has no zero value to start from
    channel = BinaryOperatorAggregate(list | None, lambda old, new: new)
    assert channel.value is compat.MISSING
    channel.update([["x"]])
    assert channel.value == ["x"]
    assert BinaryOperatorAggregate(list, add_messages).value == []  # a type with a zero value starts there


def test_superstep_bound_is_a_positive_int():
    assert isinstance(compat.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT, int)
    assert compat.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT > 0


def test_config_key_checkpointer_is_where_pregel_finds_the_checkpointer():
    from langgraph.checkpoint.memory import InMemorySaver
    from typing_extensions import TypedDict

    class State(TypedDict):
        n: int

    builder = StateGraph(State)
    builder.add_node("step", lambda state: {"n": state["n"] + 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    graph = builder.compile()  # no checkpointer of its own: the config supplies one
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t", compat.CONFIG_KEY_CHECKPOINTER: saver}}
    assert graph.invoke({"n": 1}, config) == {"n": 2}
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None


def test_delta_channels_to_replay_lists_the_delta_channels_with_a_version_and_nothing_stored():
    from langgraph.channels.delta import DeltaChannel

    specs = {"messages": DeltaChannel(add_messages)}
    def checkpoint(values, versions):
        return {"channel_values": values, "channel_versions": versions}
    assert compat._delta_channels_to_replay(specs, checkpoint({}, {"messages": "2"})) == ["messages"]
    assert compat._delta_channels_to_replay(specs, checkpoint({}, {})) == []  # never written: reads empty
    # anything stored, even None, is read with from_checkpoint, not replayed
    assert compat._delta_channels_to_replay(specs, checkpoint({"messages": None}, {"messages": "2"})) == []
    snapshot = compat._DeltaSnapshot([HumanMessage("x", id="x1")])
    stored_snapshot = checkpoint({"messages": snapshot}, {"messages": "2"})
    assert compat._delta_channels_to_replay(specs, stored_snapshot) == []


def test_pregel_algo_derives_task_ids_through_the_two_hashes():
    for name in ("_xxhash_str", "_uuid5_str"):
        assert callable(getattr(compat._algo, name)), name
    first = compat._algo._xxhash_str(b"\x00" * 16, "a", "b")
    assert first == compat._algo._xxhash_str(b"\x00" * 16, "a", "b") and isinstance(first, str)


def _private_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "langgraph" and any(p.startswith("_") for p in parts)


#: Test modules whose subject is LangGraph's own storage internals (they compare against them on purpose).
LANGGRAPH_INTERNALS_TESTS = {"tests/deerflow/runtime/test_storage_shape.py", "tests/deerflow/test_langgraph_compat.py"}


def test_no_private_langgraph_import_outside_the_compat_module():
    offenders = []
    walked = set()
    for package in ("deerflow", "dashboard", "benchmarks", "tests"):
        for path in (REPO / package).rglob("*.py"):
            walked.add(path.relative_to(REPO).as_posix())
            if (path == REPO / "deerflow" / "_langgraph_compat.py"
                    or path.relative_to(REPO).as_posix() in LANGGRAPH_INTERNALS_TESTS):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                # importlib.import_module("langgraph._internal...") is an import too.
                if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                        == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str) and _private_module(node.args[0].value)):
                    offenders.append(f"{path.relative_to(REPO)}: import_module({node.args[0].value!r})")
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("langgraph"):
                    private = [a.name for a in node.names if a.name.startswith("_")]
                    if private or any(p.startswith("_") for p in node.module.split(".")):
                        offenders.append(f"{path.relative_to(REPO)}: from {node.module} import ...")
                elif isinstance(node, ast.Import):
                    offenders += [f"{path.relative_to(REPO)}: import {a.name}" for a in node.names
                                  if a.name.startswith("langgraph") and any(p.startswith("_")
                                                                              for p in a.name.split("."))]
    assert offenders == []
    # The walk covered the four trees (not an empty glob).
    assert {"deerflow/convert/encoding.py", "dashboard/threads/services.py",
            "benchmarks/bench_list.py", "tests/deerflow/convert/test_onepass.py"} <= walked
