"""Write real threads for the fleet tests, the way DeerFlow writes them.

A LangGraph graph compiled with the mode's thread state schema
(``get_thread_state_schema``) runs on the real saver of a ``database:`` block,
with a config that went through ``inject_checkpoint_mode`` (or, with
``marker=False``, a plain LangGraph config: a marker-less delta writer).
Nothing is inserted into the tables by hand.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.config.database_config import DatabaseConfig
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from deerflow.storage.savers import open_checkpointer


def _agent(state) -> dict:
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"echo: {last.content}", id=f"ai-{last.id}")]}


def write_turns(
    database: DatabaseConfig,
    thread_id: str,
    turns: int,
    *,
    mode: str = "delta",
    snapshot_frequency: int = 10,
    marker: bool = True,
    from_checkpoint_id: str | None = None,
    start: int = 0,
) -> list[str]:
    """Run ``turns`` turns (a human message and an echo reply each) on ``thread_id``.

    ``from_checkpoint_id`` starts the first turn from that checkpoint (a fork
    when it is not the head). Returns the head checkpoint id after each turn.
    """
    builder = StateGraph(get_thread_state_schema(mode, snapshot_frequency))
    builder.add_node("agent", _agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    heads: list[str] = []
    with open_checkpointer(database, create=True) as saver:
        graph = builder.compile(checkpointer=saver)
        base: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
        config = inject_checkpoint_mode(base, mode) if marker else base
        for index in range(start, start + turns):
            run_config = config
            if from_checkpoint_id and index == start:
                run_config = {**config, "configurable": {**config["configurable"],
                                                         "checkpoint_id": from_checkpoint_id}}
            graph.invoke({"messages": [HumanMessage(content=f"turn {index}", id=f"human-{thread_id}-{index}")]},
                         run_config)
            heads.append(graph.get_state(config).config["configurable"]["checkpoint_id"])
    return heads
