"""Write real threads into a private, writable checkpoint database for dashboard tests.

A thread is written the way DeerFlow writes one: a LangGraph graph compiled
with the mode's thread state schema (``get_thread_state_schema``), run with a
config that went through ``inject_checkpoint_mode``, on the real saver for the
``database:`` block. Nothing is inserted into the tables by hand.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.config.database_config import DatabaseConfig
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from deerflow.storage.savers import open_checkpointer


def _agent(state) -> dict:
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"echo: {last.content}", id=f"ai-{last.id}")]}


def write_thread(
    database: DatabaseConfig,
    thread_id: str,
    *,
    mode: str = "full",
    turns: list[str] | None = None,
    snapshot_frequency: int = 10,
) -> None:
    """Run ``turns`` (human message texts; default one turn) on ``thread_id`` in ``mode``.

    Each turn adds the human message and an ``echo: <text>`` AI reply.
    """
    schema = get_thread_state_schema(mode, snapshot_frequency)
    builder = StateGraph(schema)
    builder.add_node("agent", _agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    with open_checkpointer(database) as saver:
        graph = builder.compile(checkpointer=saver)
        config = inject_checkpoint_mode({"configurable": {"thread_id": thread_id}}, mode)
        for index, text in enumerate(turns or [f"hello from {thread_id}"]):
            graph.invoke({"messages": [HumanMessage(content=text, id=f"human-{index}")]}, config)
