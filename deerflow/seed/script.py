"""A scripted, DeerFlow-shaped agent: the graph the seeder runs once per template.

The graph is the shape DeerFlow's lead agent has in the checkpoint tables
(and the real fixture's): ``agent`` (AI messages, tool calls on some rounds,
the thread ``title`` on the first answer) -> ``tools`` (one ``ToolMessage``
per call, sometimes a long output, ``todos`` when the agent called
``write_todos``) -> ``agent`` ... -> ``END``. It is compiled with
:func:`deerflow.agents.thread_state.get_thread_state_schema`, so a delta
template gets DeerFlow's ``DeltaChannel(merge_message_writes)`` at the
requested cadence.

Everything the agent says comes from a :class:`TurnPlan` drawn from a seeded
``random.Random``: the same ``(seed, template)`` always writes the same
messages, so a seeded thread has a known expected digest.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

from deerflow.agents.thread_state import get_thread_state_schema

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["ScriptedAgent", "TurnPlan", "plan_turns"]

_WORDS = (
    "checkpoint thread delta snapshot agent tool search result page model channel state message "
    "summary graph node write read replay version blob cadence fleet worker process config latency "
    "storage index query table migration report deploy cluster region dataset metric budget plan "
    "review draft source citation answer question context window token cost error retry timeout"
).split()
_TOOLS = ("web_search", "web_fetch", "read_file", "bash", "write_todos", "python")


@dataclass(frozen=True)
class TurnPlan:
    """What the agent does in one turn.

    Attributes:
        question: the human message text.
        rounds: tool rounds before the final answer; each round is a list of
            ``(tool name, args, output text)`` calls (one AI message with
            ``len(round)`` tool calls, then one ``ToolMessage`` per call).
        answer: the final AI message text.
    """

    question: str
    rounds: tuple[tuple[tuple[str, dict[str, Any], str], ...], ...]
    answer: str


def _text(rng: random.Random, low: int, high: int, scale: float = 1.0) -> str:
    """Pseudo-prose of ``low..high`` characters times ``scale`` (about 7 characters a word)."""
    n = max(1, int(rng.randint(low, high) * scale) // 7)
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + "."


def _tool_call(rng: random.Random, long_output_rate: float, scale: float) -> tuple[str, dict[str, Any], str]:
    name = rng.choice(_TOOLS)
    if name == "write_todos":
        args: dict[str, Any] = {"todos": [{"content": _text(rng, 20, 60, scale), "status": "pending"}
                                          for _ in range(rng.randint(1, 4))]}
        return name, args, "Updated todo list."
    args = {"query": _text(rng, 20, 80, scale)} if name.startswith("web") else {"input": _text(rng, 10, 120, scale)}
    if rng.random() < long_output_rate:
        return name, args, _text(rng, 8_000, 32_000)
    return name, args, _text(rng, 80, 1_500, scale)


def plan_turns(rng: random.Random, turns: int, *, long_output_rate: float = 0.05, text_scale: float = 1.0,
               max_tool_rounds: int = 3) -> list[TurnPlan]:
    """``turns`` turn plans: 0-3 tool rounds (1-2 calls each), prose of realistic lengths.

    Args:
        rng: the template's seeded generator.
        turns: how many plans (count >= 1).
        long_output_rate: probability that one tool output is 8-32 KB (0..1; never scaled).
        text_scale: multiplies every other text length (e.g. 0.1 for small conversion benchmarks).
        max_tool_rounds: at most this many tool rounds per turn (0..3; 0 gives plain question/answer turns).
    """
    plans = []
    weights = (40, 35, 20, 5)[:max_tool_rounds + 1]
    for _ in range(turns):
        n_rounds = rng.choices(range(len(weights)), weights=weights)[0]
        rounds = tuple(
            tuple(_tool_call(rng, long_output_rate, text_scale) for _ in range(2 if rng.random() < 0.25 else 1))
            for _ in range(n_rounds)
        )
        plans.append(TurnPlan(_text(rng, 40, 400, text_scale), rounds, _text(rng, 200, 2_000, text_scale)))
    return plans


class ScriptedAgent:
    """Compile and drive the scripted agent graph on one saver.

    Args:
        mode: ``"full"`` or ``"delta"`` (the thread state schema to compile).
        snapshot_frequency: delta cadence (updates per snapshot).
        checkpointer: the LangGraph saver the graph writes to.
        plans: the turn plans; :attr:`turn` selects the one the next run follows.
        rng: generates message and tool-call ids.
    """

    def __init__(self, mode: str, snapshot_frequency: int, checkpointer: BaseCheckpointSaver[Any],
                 plans: list[TurnPlan], rng: random.Random):
        self.plans = plans
        self.rng = rng
        self.turn = 0
        builder: StateGraph[Any] = StateGraph(get_thread_state_schema(mode, snapshot_frequency))
        builder.add_node("agent", self._agent)
        builder.add_node("tools", self._tools)
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", self._route, ["tools", END])
        builder.add_edge("tools", "agent")
        self.graph = builder.compile(checkpointer=checkpointer)

    def _id(self, prefix: str) -> str:
        return f"{prefix}{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    def human(self) -> HumanMessage:
        """The human message that opens the current turn."""
        return HumanMessage(self.plans[self.turn].question, id=self._id(""))

    def _agent(self, state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        last_human = max(i for i, m in enumerate(messages) if m.type == "human")
        done = sum(1 for m in messages[last_human:] if m.type == "ai")
        plan = self.plans[self.turn]
        out: dict[str, Any] = {}
        if done < len(plan.rounds):
            calls = [{"name": name, "args": args, "id": self._id("call_")} for name, args, _ in plan.rounds[done]]
            out["messages"] = [AIMessage("", id=self._id("lc_run--"), tool_calls=calls)]
        else:
            out["messages"] = [AIMessage(plan.answer, id=self._id("lc_run--"))]
            if not state.get("title"):
                out["title"] = plan.question[:48]
        return out

    def _tools(self, state: dict[str, Any]) -> dict[str, Any]:
        call_message = state["messages"][-1]
        messages = state["messages"]
        last_human = max(i for i, m in enumerate(messages) if m.type == "human")
        done = sum(1 for m in messages[last_human:] if m.type == "ai") - 1
        outputs = self.plans[self.turn].rounds[done]
        out: dict[str, Any] = {"messages": [
            ToolMessage(output, name=name, tool_call_id=call["id"], id=self._id(""))
            for call, (name, _args, output) in zip(call_message.tool_calls, outputs, strict=True)
        ]}
        todos = [c["args"]["todos"] for c in call_message.tool_calls if c["name"] == "write_todos"]
        if todos:
            out["todos"] = todos[-1]
        return out

    @staticmethod
    def _route(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else END
