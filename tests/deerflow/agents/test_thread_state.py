"""deerflow.agents.thread_state: merge_message_writes and the mode-specific schemas.

Spec, "State schemas". ``merge_message_writes`` is checked against LangGraph's
own ``add_messages`` folded over the same writes (hypothesis), and for the
batching invariance ``DeltaChannel`` requires of its reducer.
"""

from __future__ import annotations

import copy
import functools
from typing import Annotated, Any, get_args, get_type_hints

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.delta import DeltaChannel
from langgraph.channels.last_value import LastValue
from langgraph.graph import START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from typing_extensions import TypedDict

from deerflow.agents import thread_state as ts
from deerflow.agents.thread_state import (
    DELTA_MESSAGES_FIELD,
    THREAD_STATE_REDUCER_FIELDS,
    DeltaThreadState,
    ThreadState,
    adapt_state_schema_for_mode,
    delta_messages_field,
    get_thread_state_schema,
    merge_message_writes,
    normalize_middleware_state_schemas,
)
from deerflow.convert.digest import canonical_messages
from deerflow.runtime.checkpoint_mode import freeze_checkpoint_snapshot_frequency

# -- generated writes ---------------------------------------------------------

ID_POOL = [f"m{i}" for i in range(7)]
TEXTS = ["", "hi", "tool said", "ünïcødé ✓", "a\nb"]


def _message(kind: str, mid: str | None, text: str) -> Any:
    if kind == "human":
        return HumanMessage(text, id=mid)
    if kind == "ai":
        return AIMessage(text, id=mid,
                         tool_calls=[{"name": "t", "args": {"q": text}, "id": f"c-{mid}"}] if text == "hi" else [])
    if kind == "tool":
        return ToolMessage(text, tool_call_id=f"c-{mid}", id=mid)
    if kind == "system":
        return SystemMessage(text, id=mid)
    # a message-like dict, coerced by both reducers
    return {"role": "user", "content": text, "id": mid}


def _ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


def _draw_writes(data: st.DataObject, state: list[Any], *, allow_idless: bool, max_writes: int = 7) -> list[Any]:
    """Writes drawn one op at a time; RemoveMessage only names ids that exist at that point."""
    reference = list(state)
    writes: list[Any] = []
    for _ in range(data.draw(st.integers(0, max_writes), label="n_writes")):
        write: list[Any] = []
        known = set(_ids(reference)) & set(ID_POOL)  # never add_messages' random ids
        for _ in range(data.draw(st.integers(0, 5), label="n_ops")):
            op = data.draw(st.sampled_from(["msg", "msg", "msg", "remove", "remove_all"]), label="op")
            if op == "msg":
                ids = ID_POOL + [None] if allow_idless else ID_POOL
                mid = data.draw(st.sampled_from(ids), label="id")
                kind = data.draw(st.sampled_from(["human", "ai", "tool", "system", "dict"]), label="kind")
                write.append(_message(kind, mid, data.draw(st.sampled_from(TEXTS), label="text")))
                if mid is not None:
                    known.add(mid)
            elif op == "remove" and known:
                write.append(RemoveMessage(id=data.draw(st.sampled_from(sorted(known)), label="rm")))
            elif op == "remove_all":
                write.append(RemoveMessage(id=REMOVE_ALL_MESSAGES))
        if len(write) == 1 and data.draw(st.booleans(), label="bare"):
            writes.append(write[0])  # a bare message-like write, as a node may return
        else:
            writes.append(write)
        reference = add_messages(reference, copy.deepcopy(writes[-1]))
    return writes


def _fold_add_messages(state: list[Any], writes: list[Any]) -> list[Any]:
    # add_messages assigns ids in place; work on copies so the inputs stay pristine
    return functools.reduce(add_messages, copy.deepcopy(writes), copy.deepcopy(state))


def _shape(messages: list[Any]) -> list[tuple[Any, ...]]:
    """Canonical form without ids, for id-less messages (add_messages ids them at random)."""
    return [(c["type"], c["name"], repr(c["content"]), c["tool_call_id"]) for c in canonical_messages(messages)]


SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.data())
def test_merge_equals_folding_add_messages(data):
    state = merge_message_writes([], _draw_writes(data, [], allow_idless=False, max_writes=3))
    writes = _draw_writes(data, state, allow_idless=False)
    before = copy.deepcopy((state, writes))
    merged = merge_message_writes(state, writes)
    assert canonical_messages(merged) == canonical_messages(_fold_add_messages(state, writes))
    assert (state, writes) == before  # inputs not mutated


@SETTINGS
@given(st.data())
def test_merge_is_batching_invariant(data):
    state = merge_message_writes([], _draw_writes(data, [], allow_idless=False, max_writes=3))
    writes = _draw_writes(data, state, allow_idless=False)
    cut = data.draw(st.integers(0, len(writes)), label="cut")
    a, b = writes[:cut], writes[cut:]
    whole = merge_message_writes(state, a + b)
    stepwise = merge_message_writes(merge_message_writes(state, a), b)
    assert canonical_messages(whole) == canonical_messages(stepwise)
    # and one write at a time, which is how a live channel receives them
    one_by_one = functools.reduce(lambda s, w: merge_message_writes(s, [w]), writes, state)
    assert canonical_messages(whole) == canonical_messages(one_by_one)


@SETTINGS
@given(st.data())
def test_idless_messages_get_stable_ids_and_the_add_messages_shape(data):
    state = merge_message_writes([], _draw_writes(data, [], allow_idless=True, max_writes=3))
    writes = _draw_writes(data, state, allow_idless=True)
    first = merge_message_writes(state, writes)
    second = merge_message_writes(state, writes)
    assert canonical_messages(first) == canonical_messages(second)  # deterministic ids
    assert all(m.id is not None for m in first)
    # same messages as add_messages, up to its random ids; in particular no id-less
    # message may collide with (and so replace) an existing one
    assert _shape(first) == _shape(_fold_add_messages(state, writes))
    cut = data.draw(st.integers(0, len(writes)), label="cut")
    stepwise = merge_message_writes(merge_message_writes(state, writes[:cut]), writes[cut:])
    assert canonical_messages(stepwise) == canonical_messages(first)


# -- unit cases ---------------------------------------------------------------


def test_idless_messages_get_deterministic_ids():
    writes = [[HumanMessage("hello")], [AIMessage("hi there")], [HumanMessage("hello")]]
    a = merge_message_writes([], writes)
    b = merge_message_writes([], copy.deepcopy(writes))
    assert _ids(a) == _ids(b)
    assert len(set(_ids(a))) == 3  # the repeated text got its own id
    assert all(isinstance(i, str) and len(i) == 36 for i in _ids(a))
    assert writes[0][0].id is None  # the caller's message was not given an id


def test_an_idless_message_never_takes_an_existing_id():
    """Regression: a derived id equal to a live message's id would *replace* it."""
    state = merge_message_writes([], [[AIMessage("x", id="a")], [HumanMessage("hi")]])
    state = merge_message_writes(state, [[RemoveMessage(id="a")]])
    assert [m.content for m in state] == ["hi"]
    # same content, same type, same live position as the surviving message
    after = merge_message_writes(state, [[HumanMessage("hi")]])
    assert [m.content for m in after] == ["hi", "hi"]
    assert len(set(_ids(after))) == 2
    reference = add_messages(copy.deepcopy(state), [HumanMessage("hi")])
    assert len(reference) == 2


def test_remove_drops_every_occurrence_of_a_duplicated_id_like_add_messages():
    # REMOVE_ALL keeps its tail verbatim, duplicates included (add_messages does too)
    state = merge_message_writes([], [[RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("a", id="d"),
                                       AIMessage("b", id="d"), AIMessage("c", id="e")]])
    assert _ids(state) == ["d", "d", "e"]
    writes = [[RemoveMessage(id="d")]]
    assert _ids(merge_message_writes(state, writes)) == ["e"]
    assert _ids(_fold_add_messages(state, writes)) == ["e"]
    # replacement targets the last occurrence
    replaced = merge_message_writes(state, [[HumanMessage("z", id="d")]])
    assert [m.content for m in replaced] == ["a", "z", "c"]
    assert canonical_messages(replaced) == canonical_messages(_fold_add_messages(state, [[HumanMessage("z", id="d")]]))


def test_none_write_raises_like_add_messages():
    for state in ([], [HumanMessage("x", id="1")]):
        with pytest.raises(ValueError) as ours:
            merge_message_writes(state, [[AIMessage("y", id="2")], None] if not state else [None])
        with pytest.raises(ValueError) as theirs:
            functools.reduce(add_messages, [[AIMessage("y", id="2")], None] if not state else [None],
                             copy.deepcopy(state))
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="Only received: 'right'"):
        merge_message_writes([], [None])
    with pytest.raises(ValueError, match="Only received: 'right'"):
        add_messages([], None)


def test_no_writes_returns_a_copy_of_the_state():
    state = [HumanMessage("x", id="1")]
    out = merge_message_writes(state, [])
    assert canonical_messages(out) == canonical_messages(state) and out is not state
    assert merge_message_writes(None, []) == []
    assert merge_message_writes(None, [[HumanMessage("a", id="a")]])[0].id == "a"


def test_unknown_id_remove_raises_like_add_messages():
    state = [HumanMessage("x", id="1")]
    with pytest.raises(ValueError) as ours:
        merge_message_writes(state, [[RemoveMessage(id="nope")]])
    with pytest.raises(ValueError) as theirs:
        add_messages(copy.deepcopy(state), [RemoveMessage(id="nope")])
    assert str(ours.value) == str(theirs.value) == (
        "Attempting to delete a message with an ID that doesn't exist ('nope')")


def test_remove_all_keeps_only_the_tail_after_the_last_marker():
    state = [HumanMessage("a", id="a"), AIMessage("b", id="b")]
    write = [HumanMessage("c", id="c"), RemoveMessage(id=REMOVE_ALL_MESSAGES), AIMessage("d", id="d"),
             RemoveMessage(id=REMOVE_ALL_MESSAGES), SystemMessage("e", id="e")]
    assert _ids(merge_message_writes(state, [write])) == ["e"]
    assert _ids(merge_message_writes(state, [write, [HumanMessage("f", id="f")]])) == ["e", "f"]


def test_inputs_are_not_mutated():
    state = [HumanMessage("a", id="a"), AIMessage("b")]
    writes = [[HumanMessage("c"), RemoveMessage(id="a")], AIMessageChunk(content="chunk", id="k")]
    snapshot = copy.deepcopy((state, writes))
    out = merge_message_writes(state, writes)
    assert (state, writes) == snapshot
    assert state[1].id is None and writes[0][0].id is None
    assert [m.type for m in out] == ["ai", "human", "ai"]
    assert type(out[-1]) is AIMessage  # chunks are converted, as add_messages does


def test_message_likes_are_coerced():
    out = merge_message_writes([("user", "hi")], [("assistant", "hello"), ["plain string"],
                                                  {"role": "system", "content": "s", "id": "s"}])
    assert [m.type for m in out] == ["human", "ai", "human", "system"]
    assert out[-1].id == "s"


def test_linear_in_the_number_of_messages():
    """50k single-message writes (with a removal every 50th write) fold in one pass.

    Folding ``add_messages`` one write at a time would copy and re-index the
    whole list per write (~1.25e9 element steps here); this finishes quickly.
    """
    writes: list[Any] = []
    for i in range(50_000):
        if i % 50 == 49:
            writes.append([RemoveMessage(id=f"m{i - 1}")])
        else:
            writes.append([HumanMessage(f"m{i}", id=f"m{i}") if i % 2 else AIMessage(f"m{i}", id=f"m{i}")])
    out = merge_message_writes([], writes)
    assert len(out) == 50_000 - 2 * 1000
    assert out[0].id == "m0" and out[-1].id == "m49997"
    assert "m48" not in {m.id for m in out[:60]}


# -- reducers of the other channels --------------------------------------------


def test_channel_reducers():
    assert ts.merge_artifacts(["a", "b"], ["b", "c"]) == ["a", "b", "c"]
    assert ts.merge_artifacts(None, None) == []
    assert ts.merge_viewed_images({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    assert ts.merge_viewed_images({"a": 1}, {}) == {}
    assert ts.merge_viewed_images({"a": 1}, None) == {"a": 1}
    assert ts.merge_list_unique([1, 2], [2, 3]) == [1, 2, 3]
    assert ts.merge_todos([1], None) == [1] and ts.merge_todos([1], []) == [] and ts.merge_todos(None, [2]) == [2]
    assert ts.merge_goal({"g": 1}, None) == {"g": 1} and ts.merge_goal({"g": 1}, {"g": 2}) == {"g": 2}
    assert ts.merge_sandbox(None, {"sandbox_id": "s"}) == {"sandbox_id": "s"}
    assert ts.merge_sandbox({"sandbox_id": "s"}, {"sandbox_id": "s"}) == {"sandbox_id": "s"}
    assert ts.merge_sandbox({"sandbox_id": "s"}, None) == {"sandbox_id": "s"}
    with pytest.raises(ValueError, match="Conflicting sandbox state updates"):
        ts.merge_sandbox({"sandbox_id": "s"}, {"sandbox_id": "t"})
    assert ts.merge_promoted(None, {"catalog_hash": "h", "names": ["a", "a"]}) == {"catalog_hash": "h", "names": ["a"]}
    assert ts.merge_promoted({"catalog_hash": "h", "names": ["a"]}, {"catalog_hash": "h", "names": ["b", "a"]}) == {
        "catalog_hash": "h", "names": ["a", "b"]}
    assert ts.merge_promoted({"catalog_hash": "h", "names": ["a"]}, {"catalog_hash": "k", "names": ["c"]}) == {
        "catalog_hash": "k", "names": ["c"]}
    assert ts.merge_promoted({"catalog_hash": "h", "names": ["a"]}, None) == {"catalog_hash": "h", "names": ["a"]}


# -- schemas ------------------------------------------------------------------

DEERFLOW_CHANNELS = {
    "messages", "sandbox", "thread_data", "title", "artifacts", "todos", "goal", "uploaded_files",
    "viewed_images", "promoted", "delegations", "skill_context", "summary_text", "background_tasks",
}


def _compiled_channels(schema: type) -> dict[str, Any]:
    builder = StateGraph(schema)
    builder.add_node("n", lambda state: {})
    builder.add_edge(START, "n")
    return {k: v for k, v in builder.compile().channels.items() if k in DEERFLOW_CHANNELS}


def test_thread_state_has_deerflows_channels():
    assert set(get_type_hints(ThreadState)) == DEERFLOW_CHANNELS
    assert set(get_type_hints(DeltaThreadState)) == DEERFLOW_CHANNELS


def test_reducer_fields_are_deerflows_and_match_the_compiled_channel_table():
    assert THREAD_STATE_REDUCER_FIELDS == frozenset(
        {"messages", "sandbox", "artifacts", "todos", "goal", "viewed_images", "promoted", "delegations",
         "skill_context"}
    )
    for mode in ("full", "delta"):
        channels = _compiled_channels(get_thread_state_schema(mode))
        assert set(channels) == DEERFLOW_CHANNELS
        reducers = {k for k, ch in channels.items() if isinstance(ch, (BinaryOperatorAggregate, DeltaChannel))}
        assert reducers == THREAD_STATE_REDUCER_FIELDS
        assert all(isinstance(channels[k], LastValue) for k in DEERFLOW_CHANNELS - THREAD_STATE_REDUCER_FIELDS)
        for name in THREAD_STATE_REDUCER_FIELDS - {"messages"}:
            assert isinstance(channels[name], BinaryOperatorAggregate), name


def test_messages_channel_type_per_mode():
    full = _compiled_channels(ThreadState)["messages"]
    assert isinstance(full, BinaryOperatorAggregate) and not isinstance(full, DeltaChannel)
    assert full.operator is add_messages
    delta = _compiled_channels(DeltaThreadState)["messages"]
    assert isinstance(delta, DeltaChannel)
    assert delta.reducer is merge_message_writes
    assert delta.snapshot_frequency == 10


def test_delta_messages_field_shape():
    base, channel = get_args(DELTA_MESSAGES_FIELD)
    assert base == list[AnyMessage]
    assert isinstance(channel, DeltaChannel) and channel.reducer is merge_message_writes
    assert channel.snapshot_frequency == 10
    _, channel3 = get_args(delta_messages_field(snapshot_frequency=3))
    assert channel3.snapshot_frequency == 3
    freeze_checkpoint_snapshot_frequency(7)
    _, frozen = get_args(delta_messages_field())
    assert frozen.snapshot_frequency == 7
    with pytest.raises(ValueError):
        delta_messages_field(0)


def test_get_thread_state_schema_selection_and_caching():
    assert get_thread_state_schema("full") is ThreadState
    assert get_thread_state_schema("anything-not-delta") is ThreadState
    assert get_thread_state_schema("full", 25) is ThreadState
    assert get_thread_state_schema("delta") is DeltaThreadState
    assert get_thread_state_schema("delta", 10) is DeltaThreadState  # the name survives only at the default
    f25 = get_thread_state_schema("delta", 25)
    assert f25 is not DeltaThreadState
    assert get_thread_state_schema("delta", 25) is f25  # cached: the same object twice
    assert _compiled_channels(f25)["messages"].snapshot_frequency == 25
    assert _compiled_channels(get_thread_state_schema("delta", 1))["messages"].snapshot_frequency == 1
    with pytest.raises(ValueError):
        get_thread_state_schema("delta", 0)
    with pytest.raises(ValueError):
        get_thread_state_schema("delta", True)


def test_get_thread_state_schema_uses_the_frozen_cadence():
    freeze_checkpoint_snapshot_frequency(4)
    schema = get_thread_state_schema("delta")
    assert schema is get_thread_state_schema("delta", 4)
    assert _compiled_channels(schema)["messages"].snapshot_frequency == 4


class MiddlewareState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    note: str


class NoMessagesState(TypedDict):
    counter: int


class _Middleware:
    def __init__(self, schema: Any):
        self.state_schema = schema
        self.name = "mw"


class _Plain:
    pass


def test_adapt_state_schema_for_mode():
    hints_before = get_type_hints(MiddlewareState, include_extras=True)
    delta = adapt_state_schema_for_mode(MiddlewareState, "delta")
    assert delta is not MiddlewareState
    assert adapt_state_schema_for_mode(MiddlewareState, "delta") is delta  # cached
    assert get_type_hints(MiddlewareState, include_extras=True) == hints_before  # caller's schema untouched
    channels = _compiled_channels(delta)
    assert isinstance(channels["messages"], DeltaChannel) and channels["messages"].snapshot_frequency == 10
    assert set(get_type_hints(delta)) == {"messages", "note"}
    assert adapt_state_schema_for_mode(MiddlewareState, "full") is MiddlewareState  # already full
    back = adapt_state_schema_for_mode(delta, "full")
    assert isinstance(_compiled_channels(back)["messages"], BinaryOperatorAggregate)
    assert not isinstance(_compiled_channels(back)["messages"], DeltaChannel)
    f5 = adapt_state_schema_for_mode(MiddlewareState, "delta", 5)
    assert _compiled_channels(f5)["messages"].snapshot_frequency == 5
    assert adapt_state_schema_for_mode(NoMessagesState, "delta") is NoMessagesState
    assert adapt_state_schema_for_mode(ThreadState, "delta") is DeltaThreadState
    assert adapt_state_schema_for_mode(DeltaThreadState, "full") is ThreadState
    assert adapt_state_schema_for_mode(ThreadState, "delta", 25) is get_thread_state_schema("delta", 25)


def test_adapted_middleware_schema_compiles_against_the_delta_thread_schema():
    """Unadapted, LangGraph refuses the conflicting channel; adapted, it compiles as a DeltaChannel."""
    def compile_with(schema: type) -> Any:
        builder = StateGraph(DeltaThreadState)
        builder.add_node("mw", lambda state: {}, input_schema=schema)
        builder.add_edge(START, "mw")
        return builder.compile()

    with pytest.raises(ValueError, match="Channel 'messages' already exists with a different type"):
        compile_with(MiddlewareState)
    graph = compile_with(adapt_state_schema_for_mode(MiddlewareState, "delta"))
    assert isinstance(graph.channels["messages"], DeltaChannel)
    assert "note" in graph.channels


def test_normalize_middleware_state_schemas_returns_adapted_copies():
    adaptable = _Middleware(MiddlewareState)
    untouched = _Middleware(NoMessagesState)
    none_schema = _Middleware(None)
    plain = _Plain()
    middleware = [adaptable, untouched, none_schema, plain]
    original = list(middleware)

    out = normalize_middleware_state_schemas(middleware, "delta")
    assert middleware == original and out is not middleware
    assert out[0] is not adaptable and isinstance(out[0], _Middleware)
    assert out[0].state_schema is adapt_state_schema_for_mode(MiddlewareState, "delta")
    assert out[0].name == "mw"
    assert adaptable.state_schema is MiddlewareState  # caller's object untouched
    assert out[1] is untouched and out[2] is none_schema and out[3] is plain

    full = normalize_middleware_state_schemas(middleware, "full")
    assert all(a is b for a, b in zip(full, middleware, strict=True))

    f3 = normalize_middleware_state_schemas(middleware, "delta", 3)
    assert _compiled_channels(f3[0].state_schema)["messages"].snapshot_frequency == 3
