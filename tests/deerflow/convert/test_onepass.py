"""The one-pass walk on its own (``deerflow.convert.onepass``): the contract its docstring states,
on nodes built in memory with real LangChain messages and LangGraph's own wrapper types."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, RemoveMessage, ToolMessage
from langgraph.types import Overwrite

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.agents.thread_state import merge_message_writes
from deerflow.convert.digest import canonical_messages, messages_sha256
from deerflow.convert.encoding import MessageDigester
from deerflow.convert.onepass import (
    CheckpointNode,
    Finding,
    Materialized,
    _appended,
    materialize_namespace,
    replay,
    stored_seed,
)
from tests.deerflow.agents.test_thread_state import SETTINGS, TEXTS, _draw_writes, _message

H0, A0, H1, A1 = (HumanMessage("q0", id="h0"), AIMessage("a0", id="a0"), HumanMessage("q1", id="h1"),
                  AIMessage("a1", id="a1"))


def _walk(*nodes: CheckpointNode) -> tuple[dict[str, list[str] | None], list[tuple[str, str, bool]]]:
    values: dict[str, list[str] | None] = {}
    findings: list[tuple[str, str, bool]] = []
    for item in materialize_namespace(nodes):
        if isinstance(item, Finding):
            findings.append((item.kind, item.checkpoint_id, item.blocking))
        else:
            assert isinstance(item, Materialized)
            assert item.checkpoint_id not in values  # each checkpoint once
            values[item.checkpoint_id] = None if item.messages is None else [m.id for m in item.messages]
    return values, findings


def node(cid: str, parent: str | None, *writes: Any, stored: Any = None, version: Any = None,
         paths: tuple[str, ...] = ()) -> CheckpointNode:
    return CheckpointNode(cid, parent, stored, [(f"task-{i}", w, paths[i] if i < len(paths) else "~p")
                                                for i, w in enumerate(writes)], version)


def test_values_flow_parent_plus_parent_writes():
    values, findings = _walk(node("c0", None, [H0], version=None), node("c1", "c0", [A0], version=1),
                             node("c2", "c1", version=2))
    assert values == {"c0": [], "c1": ["h0"], "c2": ["h0", "a0"]} and findings == []


def test_seeds_snapshot_plain_none_and_snapshot_of_none():
    values, _ = _walk(node("c0", None, [H0]), node("c1", "c0", [H1], stored=_DeltaSnapshot([A0]), version=1),
                      node("c2", "c1", [A1], stored=None, version=2), node("c3", "c2", stored=[A1], version=3))
    # the snapshot's own writes apply to its child; a stored None is no seed; a plain list is one
    assert values == {"c0": [], "c1": ["a0"], "c2": ["a0", "h1"], "c3": ["a1"]}
    assert stored_seed(_DeltaSnapshot(None)) == (True, [], False)
    assert stored_seed(None) == (False, None, False)


def test_overwrite_in_writes_resets_and_wrappers_in_blobs_are_unwrapped():
    assert [m.id for m in replay([H0], [[A0], Overwrite([H1]), [A1]])] == ["h1", "a1"]
    for wrapped in (Overwrite([A0]), {"__overwrite__": [A0]}, {"type": "__overwrite__", "value": [A0]}):
        values, findings = _walk(node("c0", None, stored=wrapped, version=1))
        assert values == {"c0": ["a0"]} and findings == [("overwrite_in_blob", "c0", False)]


def test_reducer_error_is_reported_on_the_child_and_only_seedless_descendants_lose_their_value():
    values, findings = _walk(
        node("c0", None, [H0]), node("c1", "c0", [RemoveMessage(id="ghost")], version=1),
        node("c2", "c1", [A0], version=2), node("c3", "c2", version=3),
        node("s2", "c1", stored=[H1], version=9))
    assert findings == [("branch_point", "c1", False), ("reducer_error", "c2", True)]
    assert values == {"c0": [], "c1": ["h0"], "c2": None, "c3": None, "s2": ["h1"]}


def test_lineage_findings():
    _, findings = _walk(node("c0", None, [H0]), node("c1", "c0", version=1), node("c2", "gone", version=2))
    assert findings == [("dangling_parent", "c2", True)]
    values, findings = _walk(node("c0", None, [H0]), node("c1", "c0", version=1), node("c2", None, version=2))
    assert findings == [("null_parent", "c2", True)] and values["c2"] is None
    values, findings = _walk(node("c0", None), node("c1", "c2", version=1), node("c2", "c1", version=2))
    assert sorted(findings) == [("cycle", "c1", True), ("cycle", "c2", True)] and values == {"c0": []}


def test_missing_writes_only_when_the_version_moved_without_a_write():
    values, findings = _walk(node("c0", None, [H0]), node("c1", "c0", version=1), node("c2", "c1", version=2),
                             node("c3", "c2", version=2))
    assert findings == [("missing_writes", "c2", True)]
    assert values == {"c0": [], "c1": ["h0"], "c2": None, "c3": None}
    # unknown versions (None) are not judged
    assert _walk(node("c0", None, [H0]), node("c1", "c0"), node("c2", "c1"))[1] == []


def test_bad_stored_value_blocks():
    values, findings = _walk(node("c0", None, [H0]), node("c1", "c0", stored=True, version=1),
                             node("c2", "c1", version=2))
    assert findings == [("bad_stored_value", "c1", True)] and values == {"c0": [], "c1": None, "c2": None}


def test_order_unknown_needs_several_pathless_tasks():
    _, findings = _walk(node("c0", None, [H0], [A0], paths=("", "")), node("c1", "c0", version=1))
    assert findings == [("order_unknown", "c0", False)]
    _, findings = _walk(node("c0", None, [H0], [A0], paths=("", "~a")), node("c1", "c0", version=1))
    assert findings == []


def test_digest_cache_equals_messages_sha256():
    cache = MessageDigester()
    odd = AIMessage([{"type": "text", "text": "x\x00 \U0001F600"}], id="odd",
                    tool_calls=[{"name": "t", "args": {"k": "\u00e9"}, "id": "c"}])
    # Prefix extensions (the incremental path), a shorter list, a branch, an empty list, a repeat.
    sequences = ([], [H0], [H0, A0], [H0, A0, odd], [H0, A0, odd, H1], [H0], [H0, A1], [odd, H0, odd], [],
                 [odd, H0, odd], [odd, H0, odd, A1])
    for messages in sequences:
        assert cache(messages) == messages_sha256(messages), messages


def test_digest_cache_ignores_a_list_changed_after_it_was_hashed():
    cache = MessageDigester()
    messages = [H0, A0]
    cache(messages)
    messages[1] = A1  # the caller reuses its list: the cached prefix must not be trusted
    assert cache(messages + [H1]) == messages_sha256([H0, A1, H1])


# -- replay's append-only shortcut --------------------------------------------------------------


@SETTINGS
@given(st.data())
def test_replay_equals_merge_message_writes(data):
    state = merge_message_writes([], _draw_writes(data, [], allow_idless=False, max_writes=3))
    if data.draw(st.booleans(), label="appends only"):
        writes: list[Any] = []
        for i in range(data.draw(st.integers(1, 4), label="n_writes")):
            kinds = st.sampled_from(["human", "ai", "tool", "system", "system", "dict"])
            write = [_message(data.draw(kinds, label="kind"), f"new-{i}-{j}", data.draw(st.sampled_from(TEXTS)))
                     for j in range(data.draw(st.integers(1, 3), label="n_msgs"))]
            writes.append(write[0] if len(write) == 1 and data.draw(st.booleans(), label="bare") else write)
    else:
        writes = _draw_writes(data, state, allow_idless=True)
    assert canonical_messages(replay(state, writes)) == canonical_messages(merge_message_writes(state, writes))


def test_the_shortcut_takes_only_plain_appends_with_new_ids():
    base = [H0, A0]
    fresh = [H1, AIMessage("a1", id="a1")]
    assert _appended(base, [fresh]) == [H0, A0, H1, fresh[1]]
    assert _appended(base, [H1]) == [H0, A0, H1]  # a bare message write
    refused = {
        "replaces an id": [[AIMessage("again", id="a0")]],
        "removes": [[RemoveMessage(id="h0")]],
        "a message-like dict": [[{"role": "user", "content": "x", "id": "d"}]],
        "no id": [[HumanMessage("no id")]],
        "a chunk": [[AIMessageChunk("part", id="k")]],
        "one id twice": [[H1], [HumanMessage("q1 again", id="h1")]],
        "nothing": [],
    }
    for why, writes in refused.items():
        assert _appended(base, writes) is None, why
    assert _appended([{"role": "user", "content": "x", "id": "d"}], [[H1]]) is None  # base not plain
    assert _appended([HumanMessage("no id")], [[H1]]) is None
    assert (_appended([ToolMessage("r", tool_call_id="c", id="t")], [[H1]])
            == [ToolMessage("r", tool_call_id="c", id="t"), H1])
