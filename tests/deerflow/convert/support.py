"""Helpers for the ``deerflow.convert`` tests: real savers, raw rows, readings, small real threads.

Everything here goes through real LangGraph savers (``SqliteSaver`` /
``PostgresSaver``) and real compiled graphs; "crafted" threads are written
with the saver's own ``put`` / ``put_writes`` (the shapes a real graph cannot
produce on purpose: pruned history, broken lineage, odd stored values).
"""

from __future__ import annotations

import datetime as dt
import operator
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Annotated, Any, get_type_hints

import psycopg
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Overwrite
from psycopg.rows import dict_row
from typing_extensions import TypedDict

from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.digest import channels_sha256, messages_sha256
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, inject_checkpoint_mode
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

ABSENT = object()
Reading = tuple[int, str, str]  # (message count, messages_sha256, channels_sha256)


def config_for(thread_id: str, checkpoint_id: str | None = None, ns: str = "") -> dict[str, Any]:
    """``{'configurable': {thread_id, checkpoint_ns[, checkpoint_id]}}``."""
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


# -- savers and raw rows -----------------------------------------------------

@contextmanager
def open_saver(database: DatabaseConfig) -> Iterator[Any]:
    """A real ``SqliteSaver`` / ``PostgresSaver`` on an autocommit connection, tables set up."""
    if database.backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = database.sqlite_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(str(path), check_same_thread=False, timeout=30)) as conn:
            saver = SqliteSaver(conn)
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.connect(database.postgres_url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        yield saver


@contextmanager
def sql(database: DatabaseConfig) -> Iterator[Any]:
    """An independent autocommit connection (sqlite3 or psycopg, tuple rows)."""
    if database.backend == "sqlite":
        with closing(sqlite3.connect(str(database.sqlite_path()), timeout=30, isolation_level=None)) as conn:
            yield conn
        return
    with psycopg.connect(database.postgres_url, autocommit=True) as conn:
        yield conn


def settle(database: DatabaseConfig, thread_id: str, *, timeout_s: int = 60) -> None:
    """Wait until no transaction holds the thread's rewrite lock (:meth:`ConversionSession.lock_thread`).

    A SIGKILLed client's Postgres backend can outlive it: when the kill lands
    just after ``COMMIT`` was sent, the server is still committing while the
    test reads, and statements read one after the other (rows, then backups)
    would see both sides of that commit. Every rewrite (conversion,
    compaction, prune, revert) holds this lock until its transaction ends, so
    taking it once, in a session of its own that then rolls back, means the
    killed client's transaction has committed or rolled back. SQLite needs
    nothing: the OS releases a dead process's file locks.

    Raises:
        StorageUnavailableError: the lock was still held after ``timeout_s`` seconds (its driver error is
            ``psycopg.errors.LockNotAvailable``).
    """
    if database.backend != "postgres":
        return
    from deerflow.storage.sessions import open_session

    with open_session(database) as session:
        session.execute(f"SET LOCAL lock_timeout = '{int(timeout_s)}s'")
        session.lock_thread(thread_id)


def execute(database: DatabaseConfig, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on an independent connection (``?`` placeholders on both backends)."""
    if database.backend == "postgres":
        statement = statement.replace("%", "%%").replace("?", "%s")
    with sql(database) as conn:
        cur = conn.execute(statement, params)
        return list(cur.fetchall()) if cur.description else []


def raw_rows(database: DatabaseConfig, thread_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row of one thread, byte for byte, in a stable order.

    SQLite: ``checkpoints`` and ``writes``. Postgres: ``checkpoints`` (the
    JSONB columns as text), ``checkpoint_blobs`` and ``checkpoint_writes``.
    """
    if database.backend == "sqlite":
        return {
            "checkpoints": execute(database, "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
                                   "checkpoint, metadata FROM checkpoints WHERE thread_id = ? ORDER BY 1, 2",
                                   (thread_id,)),
            "writes": execute(database, "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, "
                              "task_path FROM writes WHERE thread_id = ? ORDER BY 1, 2, 3, 4", (thread_id,)),
        }
    return {
        "checkpoints": execute(database, "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
                               "checkpoint::text, metadata::text FROM checkpoints WHERE thread_id = ? ORDER BY 1, 2",
                               (thread_id,)),
        "blobs": execute(database, "SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
                         "WHERE thread_id = ? ORDER BY 1, 2, 3", (thread_id,)),
        "writes": execute(database, "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path "
                          "FROM checkpoint_writes WHERE thread_id = ? ORDER BY 1, 2, 3, 4", (thread_id,)),
    }


def all_rows(database: DatabaseConfig) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of LangGraph's tables (all threads), for "nothing was written" checks."""
    if database.backend == "sqlite":
        queries = {"checkpoints": "SELECT * FROM checkpoints", "writes": "SELECT * FROM writes"}
    else:
        queries = {
            "checkpoints": "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
                           "checkpoint::text, metadata::text FROM checkpoints",
            "checkpoint_blobs": "SELECT * FROM checkpoint_blobs",
            "checkpoint_writes": "SELECT * FROM checkpoint_writes",
        }
    return {table: sorted(execute(database, query), key=repr) for table, query in queries.items()}


def backup_ids(database: DatabaseConfig) -> list[str]:
    """Ids in ``dfa_backups`` (``[]`` when the table does not exist yet)."""
    if database.backend == "sqlite":
        exists = execute(database, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'dfa_backups'")
    else:
        exists = execute(database, "SELECT 1 FROM pg_tables WHERE tablename = 'dfa_backups'")
    if not exists:
        return []
    return [r[0] for r in execute(database, "SELECT backup_id FROM dfa_backups ORDER BY backup_id")]


def namespaces(database: DatabaseConfig, thread_id: str) -> list[str]:
    """The thread's ``checkpoint_ns`` values, root first."""
    rows = execute(database, "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (thread_id,))
    return sorted((r[0] for r in rows), key=lambda ns: (ns != "", ns))


# -- readings ----------------------------------------------------------------

def readings(database: DatabaseConfig, thread_id: str, mode: str) -> dict[tuple[str, str], Reading]:
    """``{(ns, checkpoint_id): (count, messages_sha256, channels_sha256)}`` for every checkpoint, read by
    a ``mode`` accessor (its ``history`` per namespace, i.e. LangGraph's own read path)."""
    out: dict[tuple[str, str], Reading] = {}
    with open_saver(database) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode=mode)
        for ns in namespaces(database, thread_id):
            for snapshot in accessor.iter_history(config_for(thread_id, ns=ns)):
                messages = snapshot.values.get("messages") or []
                out[(ns, snapshot.config["configurable"]["checkpoint_id"])] = (
                    len(messages), messages_sha256(messages), channels_sha256(snapshot.values))
    return out


def messages_at(database: DatabaseConfig, thread_id: str, checkpoint_id: str | None = None, *, mode: str,
                ns: str = "") -> list[Any]:
    """The materialized message list at one checkpoint (head if none), read by a ``mode`` accessor."""
    with open_saver(database) as saver:
        snapshot = CheckpointStateAccessor.for_saver(saver, mode=mode).get(config_for(thread_id, checkpoint_id, ns))
        return list(snapshot.values.get("messages") or [])


def stored_tuples(database: DatabaseConfig, thread_id: str, ns: str = "") -> list[Any]:
    """Raw saver tuples of one namespace, newest first (what a raw checkpointer read returns)."""
    with open_saver(database) as saver:
        return list(saver.list(config_for(thread_id, ns=ns)))


def checkpoint_ids(database: DatabaseConfig, thread_id: str, ns: str = "") -> list[str]:
    """Checkpoint ids of one namespace, oldest first."""
    rows = execute(database, "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
                   "ORDER BY checkpoint_id", (thread_id, ns))
    return [r[0] for r in rows]


def ids_of(messages: list[Any]) -> list[str]:
    """Message ids in order."""
    return [m.id for m in messages]


# -- real graphs -------------------------------------------------------------

def run_turn(graph: Any, thread_id: str, message: Any, *, checkpoint_id: str | None = None,
             mode: str = "delta") -> dict[str, Any]:
    """One DeerFlow-style turn: the mode marker injected, ``{'messages': [message]}`` in."""
    return graph.invoke({"messages": [message]}, inject_checkpoint_mode(config_for(thread_id, checkpoint_id), mode))


def human(turn: int, *, with_id: bool = True, content: str | None = None) -> HumanMessage:
    """The human message of ``turn`` (``id=f'h-{turn}'`` unless ``with_id`` is False)."""
    text = content if content is not None else f"question {turn}"
    return HumanMessage(text, id=f"h-{turn}") if with_id else HumanMessage(text)


def full_thread_with_fork(database: DatabaseConfig, thread_id: str, *, turns: int = 8, tool_every: int = 3,
                          fork_back: int = 8) -> None:
    """A full-mode thread whose prefix chains break: ``turns`` turns, one turn forked from the checkpoint
    ``fork_back`` before the newest, an ``Overwrite`` of ``messages``, then one more turn."""
    with open_saver(database) as saver:
        graph = agent_graph(saver, mode="full", tool_every=tool_every)
        for t in range(turns):
            run_turn(graph, thread_id, human(t), mode="full")
        run_turn(graph, thread_id, human(50), checkpoint_id=checkpoint_ids(database, thread_id)[-fork_back],
                 mode="full")
        CheckpointStateAccessor.for_saver(saver, mode="full").update(
            {"configurable": {"thread_id": thread_id}}, {"messages": Overwrite([human(99)])})
        run_turn(graph, thread_id, human(7), mode="full")


def agent_graph(saver: Any, *, mode: str = "delta", snapshot_frequency: int = 10, tool_every: int = 0,
                with_ids: bool = True, schema: type | None = None,
                extra: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Any:
    """``agent -> tools -> agent`` over DeerFlow's thread schema for ``mode`` (or ``schema``).

    The agent answers ``AIMessage(id=f'ai-{n}')`` (``n`` = messages so far; no id
    when ``with_ids`` is False); on every ``tool_every``-th human turn it first
    calls a tool whose node answers with a ``ToolMessage``. ``extra(state)`` adds
    further channel writes to the agent's update.
    """
    schema = schema or get_thread_state_schema(mode, snapshot_frequency)

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        n = len(messages)
        turn = sum(1 for m in messages if m.type == "human")
        if tool_every and turn % tool_every == 0 and messages[-1].type == "human":
            call = {"name": "lookup", "args": {"turn": turn}, "id": f"call-{turn}"}
            reply = AIMessage("", tool_calls=[call], id=f"ai-{n}" if with_ids else None)
        else:
            reply = AIMessage(f"answer {turn} after {n}", id=f"ai-{n}" if with_ids else None)
        update: dict[str, Any] = {"messages": [reply]}
        if extra is not None:
            update.update(extra(state))
        return update

    def tools(state: dict[str, Any]) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        return {"messages": [ToolMessage(f"result {call['args']}", tool_call_id=call["id"],
                                         id=f"tool-{call['id']}" if with_ids else None)]}

    def route(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        return "tools" if last.type == "ai" and last.tool_calls else END

    builder = StateGraph(schema)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def fanout_graph(saver: Any, *, snapshot_frequency: int = 10) -> Any:
    """The agent calls two tools at once; nodes ``z_tool`` and ``a_tool`` answer in the same superstep."""
    schema = get_thread_state_schema("delta", snapshot_frequency)

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        n = len(messages)
        if messages[-1].type == "human":
            calls = [{"name": name, "args": {"n": n}, "id": f"call-{name}-{n}"} for name in ("z_tool", "a_tool")]
            return {"messages": [AIMessage("", tool_calls=calls, id=f"ai-{n}")]}
        return {"messages": [AIMessage(f"done after {n}", id=f"ai-{n}")]}

    def make_tool(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def tool(state: dict[str, Any]) -> dict[str, Any]:
            ai = next(m for m in reversed(state["messages"]) if m.type == "ai" and m.tool_calls)
            call = next(c for c in ai.tool_calls if c["name"] == name)
            return {"messages": [ToolMessage(f"{name} says hi", tool_call_id=call["id"], id=f"tool-{call['id']}")]}
        return tool

    def route(state: dict[str, Any]) -> Any:
        last = state["messages"][-1]
        return ["z_tool", "a_tool"] if last.type == "ai" and last.tool_calls else END

    builder = StateGraph(schema)
    builder.add_node("agent", agent)
    builder.add_node("z_tool", make_tool("z_tool"))
    builder.add_node("a_tool", make_tool("a_tool"))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["z_tool", "a_tool", END])
    builder.add_edge("z_tool", "agent")
    builder.add_edge("a_tool", "agent")
    return builder.compile(checkpointer=saver)


def summarizing_graph(saver: Any, *, summarize_on_turn: int, snapshot_frequency: int = 10) -> Any:
    """DeerFlow's summarization-middleware shape: on turn ``summarize_on_turn`` a node before the agent
    writes ``[RemoveMessage(REMOVE_ALL_MESSAGES), *last 3]`` plus ``summary_text``."""
    schema = get_thread_state_schema("delta", snapshot_frequency)

    def summarization(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        if sum(1 for m in messages if m.type == "human") == summarize_on_turn:
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages[-3:]],
                    "summary_text": f"summary of {len(messages)}"}
        return {}

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"answer after {n}", id=f"ai-{n}-{state['messages'][-1].id}")]}

    builder = StateGraph(schema)
    builder.add_node("summarization", summarization)
    builder.add_node("agent", agent)
    builder.add_edge(START, "summarization")
    builder.add_edge("summarization", "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


def subgraph_graph(saver: Any, *, snapshot_frequency: int = 10) -> Any:
    """``agent -> research -> END`` where ``research`` is a compiled delta subgraph
    (``researcher -> reporter``), so its runs checkpoint under ``research:<task_id>``."""
    schema = get_thread_state_schema("delta", snapshot_frequency)

    def researcher(state: dict[str, Any]) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"researching after {n}", id=f"r-{n}")]}

    def reporter(state: dict[str, Any]) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"report after {n}", id=f"rep-{n}")]}

    sub = StateGraph(schema)
    sub.add_node("researcher", researcher)
    sub.add_node("reporter", reporter)
    sub.add_edge(START, "researcher")
    sub.add_edge("researcher", "reporter")
    sub.add_edge("reporter", END)
    research = sub.compile()

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"delegating after {n}", id=f"ai-{n}")]}

    builder = StateGraph(schema)
    builder.add_node("agent", agent)
    builder.add_node("research", research)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "research")
    builder.add_edge("research", END)
    return builder.compile(checkpointer=saver)


def schema_with_extra_channels(snapshot_frequency: int = 10) -> type:
    """DeerFlow's delta schema plus two middleware-style channels the converter does not know:
    ``notes`` (a reducer channel, ``operator.add``) and ``mood`` (a ``LastValue``)."""
    hints = get_type_hints(get_thread_state_schema("delta", snapshot_frequency), include_extras=True)
    hints["notes"] = Annotated[list[str], operator.add]
    hints["mood"] = str | None
    return TypedDict("ThreadStateWithMiddleware", hints)  # type: ignore[operator]


# -- crafted threads (saver.put / put_writes) ---------------------------------

class Crafter:
    """Write a delta-shaped thread checkpoint by checkpoint with the saver's own ``put`` / ``put_writes``.

    Each :meth:`checkpoint` gets a fresh, increasing uuid6 id. ``bump=True``
    gives it a new ``messages`` version (the channel was updated from the
    parent's writes); ``messages`` is what ``channel_values['messages']``
    stores (``ABSENT``: nothing, as a non-snapshot delta checkpoint).
    """

    def __init__(self, saver: Any, thread_id: str, ns: str = ""):
        self.saver, self.thread_id, self.ns = saver, thread_id, ns
        self.version: Any = None
        self.step = -2
        self.count = 0

    def checkpoint(self, parent: str | None, *, messages: Any = ABSENT, bump: bool = True, marker: bool = True,
                   step: int | None = None, version: Any = ABSENT, checkpoint_id: str | None = None) -> str:
        self.count += 1
        cid = checkpoint_id or str(uuid6(clock_seq=self.count))
        if version is not ABSENT:
            self.version = version
        elif bump:
            self.version = self.saver.get_next_version(self.version, None)
        self.step = step if step is not None else self.step + 1
        checkpoint = {"v": 2, "id": cid, "ts": dt.datetime.now(dt.UTC).isoformat(), "channel_values": {},
                      "channel_versions": {}, "versions_seen": {}, "pending_sends": [], "updated_channels": None}
        new_versions = {}
        if self.version is not None:
            checkpoint["channel_versions"]["messages"] = self.version
            new_versions["messages"] = self.version
        if messages is not ABSENT:
            checkpoint["channel_values"]["messages"] = messages
        metadata: dict[str, Any] = {"source": "loop" if self.step >= 0 else "input", "step": self.step, "parents": {}}
        if marker:
            metadata[CHECKPOINT_MODE_METADATA_KEY] = "delta"
        self.saver.put(config_for(self.thread_id, parent, self.ns), checkpoint, metadata, new_versions)
        return cid

    def writes(self, checkpoint_id: str, task_id: str, *values: Any, task_path: str = "") -> None:
        """Store ``messages`` writes of one task under ``checkpoint_id``."""
        self.saver.put_writes(config_for(self.thread_id, checkpoint_id, self.ns),
                              [("messages", v) for v in values], task_id, task_path)

    def chain(self, turns: int, *, start: str | None = None) -> list[str]:
        """``turns`` plain turns: each turn a human write then an AI write, one checkpoint per write.

        Returns the checkpoint ids oldest first (``start`` is the parent of the first; ``None``: a new root).
        """
        ids = [start] if start is not None else [self.checkpoint(None, bump=False)]
        for t in range(turns):
            self.writes(ids[-1], f"input-{t}", [HumanMessage(f"q{t}", id=f"h{t}")])
            ids.append(self.checkpoint(ids[-1]))
            self.writes(ids[-1], f"agent-{t}", [AIMessage(f"a{t}", id=f"a{t}")])
            ids.append(self.checkpoint(ids[-1]))
        return ids if start is None else ids[1:]


# -- conversion checks ---------------------------------------------------------

def convert_and_compare(database: DatabaseConfig, thread_id: str, **kwargs: Any) -> Any:
    """Convert; the status is ``converted`` and a full-mode accessor reads, at every checkpoint of every
    namespace, exactly what a delta-mode accessor read before. Returns the report."""
    from deerflow.convert import convert_thread

    before = readings(database, thread_id, "delta")
    report = convert_thread(database, thread_id, **kwargs)
    assert report.status == "converted", (report.status, report.error, report.findings)
    after = readings(database, thread_id, "full")
    assert after == before
    assert_no_delta_storage(database, thread_id)
    return report


def assert_no_delta_storage(database: DatabaseConfig, thread_id: str) -> None:
    """No checkpoint of the thread carries the DeerFlow marker, a ``messages`` counter or a ``_DeltaSnapshot``,
    and every checkpoint with a ``messages`` version stores a plain list."""
    from deerflow._langgraph_compat import _DeltaSnapshot
    from deerflow.runtime.checkpoint_mode import COUNTERS_METADATA_KEY

    for ns in namespaces(database, thread_id):
        for tup in stored_tuples(database, thread_id, ns):
            where = (ns, tup.config["configurable"]["checkpoint_id"])
            assert CHECKPOINT_MODE_METADATA_KEY not in tup.metadata, where
            assert "messages" not in (tup.metadata.get(COUNTERS_METADATA_KEY) or {}), where
            stored = tup.checkpoint["channel_values"].get("messages")
            assert not isinstance(stored, _DeltaSnapshot), where
            if "messages" in tup.checkpoint["channel_versions"]:
                assert isinstance(stored, list), where


def findings_of(report: Any, kind: str) -> list[dict[str, Any]]:
    """The report's findings of one kind."""
    return [f for f in report.findings if f["kind"] == kind]
