"""Shared helpers for the ``deerflow`` runtime tests: graphs, savers, counters.

Everything here drives real LangGraph graphs through real savers; the only
"instrumentation" is :func:`count_calls`, which wraps bound methods of a real
saver instance so a test can count what the accessor asked of it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.digest import channels_sha256, messages_sha256
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from tests import fixtures_real


def config_for(thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = "") -> dict[str, Any]:
    """``{'configurable': {thread_id, checkpoint_ns[, checkpoint_id]}}``."""
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


@contextmanager
def database_for(backend: str, tmp_path: Path) -> Iterator[DatabaseConfig]:
    """A fresh, empty ``database:`` block for ``backend`` (Postgres: a new database, dropped after)."""
    if backend == "memory":
        yield DatabaseConfig(backend="memory")
    elif backend == "sqlite":
        yield DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "sqlite"))
    else:
        name, url = fixtures_real.create_database("dfa_t")
        try:
            yield DatabaseConfig(backend="postgres", postgres_url=url)
        finally:
            fixtures_real.drop_database(name)


def row_counts(database: DatabaseConfig, saver: Any = None) -> dict[str, int]:
    """Rows in the saver's tables, read over an independent connection.

    SQLite: ``checkpoints``, ``writes``; Postgres: ``checkpoints``,
    ``checkpoint_blobs``, ``checkpoint_writes``; memory: the saver's own
    ``storage`` (checkpoints), ``writes`` and ``blobs`` dicts.
    """
    if database.backend == "memory":
        assert isinstance(saver, InMemorySaver)
        checkpoints = sum(len(per_ns) for per_thread in saver.storage.values() for per_ns in per_thread.values())
        writes = sum(len(w) for w in saver.writes.values())
        return {"checkpoints": checkpoints, "writes": writes, "blobs": len(saver.blobs)}
    if database.backend == "sqlite":
        with sqlite3.connect(str(database.sqlite_path())) as conn:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("checkpoints", "writes")}
    with psycopg.connect(database.postgres_url, autocommit=True) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        }


def count_calls(saver: Any, *names: str) -> Counter:
    """Wrap ``names`` on this saver instance so each call is counted; returns the Counter.

    The real method still runs. Calls are counted under the method name.
    """
    calls: Counter = Counter()
    for name in names:
        original = getattr(saver, name)
        if asyncio.iscoroutinefunction(original):
            async def wrapper(*args: Any, _name: str = name, _orig: Callable = original, **kwargs: Any) -> Any:
                calls[_name] += 1
                return await _orig(*args, **kwargs)
        else:  # plain methods, and (async) generators: counted when called
            def wrapper(*args: Any, _name: str = name, _orig: Callable = original, **kwargs: Any) -> Any:
                calls[_name] += 1
                return _orig(*args, **kwargs)
        setattr(saver, name, wrapper)
    return calls


# -- an agent-shaped graph, deterministic ------------------------------------

def build_agent_graph(
    mode: str,
    checkpointer: Any,
    *,
    snapshot_frequency: int | None = None,
    tool_every: int = 0,
    remove_on_turn: int | None = None,
    summarize_on_turn: int | None = None,
    fanout: bool = False,
) -> Any:
    """Compile ``agent -> tools -> agent`` over the thread schema for ``mode``.

    Turn ``t`` is the number of human messages. The agent answers
    ``AIMessage(id=f'ai-{t}-{len(messages)}')``; every ``tool_every``-th turn
    it first calls ``lookup`` (two calls with ``fanout``, each answered by its
    own parallel node ``tool_0`` / ``tool_1``). ``remove_on_turn`` makes the
    agent also remove turn 2's answer; ``summarize_on_turn`` adds a
    ``summarization`` node before the agent that writes
    ``[RemoveMessage(REMOVE_ALL_MESSAGES), *last 2]`` plus ``summary_text``.
    """
    schema = get_thread_state_schema(mode, snapshot_frequency)

    def turn_of(messages: list[Any]) -> int:
        return sum(1 for m in messages if m.type == "human")

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        turn, n = turn_of(messages), len(messages)
        out: list[Any] = []
        if remove_on_turn is not None and turn == remove_on_turn and messages[-1].type == "human":
            out.append(RemoveMessage(id="ai-2-3"))
        if tool_every and turn % tool_every == 0 and messages[-1].type == "human":
            calls = [{"name": "lookup", "args": {"q": turn, "k": k}, "id": f"call-{turn}-{k}"}
                     for k in range(2 if fanout else 1)]
            out.append(AIMessage("", id=f"ai-{turn}-{n}", tool_calls=calls))
        else:
            out.append(AIMessage(f"answer {turn} after {n}", id=f"ai-{turn}-{n}"))
        return {"messages": out}

    def make_tool(index: int | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def tool(state: dict[str, Any]) -> dict[str, Any]:
            last = next(m for m in reversed(state["messages"]) if m.type == "ai")
            calls = last.tool_calls if index is None else [last.tool_calls[index]]
            return {"messages": [
                ToolMessage(f"result {c['args']}", tool_call_id=c["id"], id=f"tool-{c['id']}") for c in calls
            ]}
        return tool

    def summarize(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        if summarize_on_turn is not None and turn_of(messages) == summarize_on_turn:
            kept = messages[-3:]
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept],
                    "summary_text": f"summary of {len(messages)}"}
        return {}

    def route(state: dict[str, Any]) -> Any:
        last = state["messages"][-1]
        if last.type == "ai" and last.tool_calls:
            return ["tool_0", "tool_1"] if fanout else "tools"
        return END

    builder = StateGraph(schema)
    first = "agent"
    if summarize_on_turn is not None:
        builder.add_node("summarization", summarize)
        builder.add_edge("summarization", "agent")
        first = "summarization"
    builder.add_node("agent", agent)
    builder.add_edge(START, first)
    if fanout:
        builder.add_node("tool_0", make_tool(0))
        builder.add_node("tool_1", make_tool(1))
        builder.add_conditional_edges("agent", route, ["tool_0", "tool_1", END])
        builder.add_edge("tool_0", "agent")
        builder.add_edge("tool_1", "agent")
    else:
        builder.add_node("tools", make_tool(None))
        builder.add_conditional_edges("agent", route, ["tools", END])
        builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def run_turn(graph: Any, thread_id: str, mode: str, turn: int, *, checkpoint_id: str | None = None,
             human_id: bool = True) -> dict[str, Any]:
    """One DeerFlow-style turn: the marker injected, ``{'messages': [HumanMessage]}`` in."""
    config = inject_checkpoint_mode(config_for(thread_id, checkpoint_id), mode)
    message = HumanMessage(f"question {turn}", id=f"h-{turn}") if human_id else HumanMessage(f"question {turn}")
    return graph.invoke({"messages": [message]}, config)


async def arun_turn(graph: Any, thread_id: str, mode: str, turn: int) -> dict[str, Any]:
    """Async twin of :func:`run_turn`."""
    config = inject_checkpoint_mode(config_for(thread_id), mode)
    return await graph.ainvoke({"messages": [HumanMessage(f"question {turn}", id=f"h-{turn}")]}, config)


def digest_of(snapshot: Any) -> tuple[int, str, str]:
    """(message count, messages_sha256, channels_sha256) of a materialized snapshot."""
    values = snapshot.values or {}
    messages = values.get("messages") or []
    return len(messages), messages_sha256(messages), channels_sha256(values)
