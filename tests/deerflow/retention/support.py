"""Helpers for the retention tests: one saver per target (memory, SQLite, Postgres), readings, real threads.

Threads are written by real graphs (:func:`tests.deerflow.convert.support.agent_graph`);
the shapes a graph makes only at run time (DeerFlow's duration stamp, a
pending write of an interrupted task) are written with the saver's own
``put`` / ``put_writes``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base.id import uuid6

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.digest import channels_sha256, messages_sha256
from deerflow.retention.reading import langgraph_reader
from tests import fixtures_real
from tests.deerflow.convert.support import agent_graph, config_for, human, open_saver, run_turn


@contextmanager
def saver_for(target: Any) -> Iterator[Any]:
    """The target's saver: the ``InMemorySaver`` itself, or a real SQLite / Postgres saver on the database."""
    if isinstance(target, DatabaseConfig):
        with open_saver(target) as saver:
            yield saver
    else:
        yield target


def ids(target: Any, thread_id: str, ns: str = "") -> list[str]:
    """Checkpoint ids of one namespace, oldest first (through the saver)."""
    with saver_for(target) as saver:
        return sorted(t.config["configurable"]["checkpoint_id"] for t in saver.list(config_for(thread_id, ns=ns)))


def all_keys(target: Any, thread_id: str) -> set[tuple[str, str]]:
    """Every ``(checkpoint_ns, checkpoint_id)`` of the thread."""
    with saver_for(target) as saver:
        return {(t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"])
                for t in saver.list({"configurable": {"thread_id": thread_id}})}


def parent_of(target: Any, thread_id: str, checkpoint_id: str, ns: str = "") -> str | None:
    """The stored parent id."""
    with saver_for(target) as saver:
        tup = saver.get_tuple(config_for(thread_id, checkpoint_id, ns))
        return tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None


def read(target: Any, thread_id: str, keys: Any = None) -> dict[tuple[str, str], tuple[int, str, str]]:
    """``{(ns, id): (count, messages_sha256, channels_sha256)}`` through a delta-mode accessor (LangGraph's reader)."""
    keys = sorted(all_keys(target, thread_id)) if keys is None else sorted(keys)
    out = {}
    with saver_for(target) as saver:
        accessor = langgraph_reader(saver)
        for ns, cid in keys:
            values = accessor.get(config_for(thread_id, cid, ns)).values
            messages = values.get("messages") or []
            out[(ns, cid)] = (len(messages), messages_sha256(messages), channels_sha256(values))
    return out


def head_messages(target: Any, thread_id: str) -> list[Any]:
    """The head's materialized messages (delta-mode accessor)."""
    with saver_for(target) as saver:
        return list(langgraph_reader(saver).get(config_for(thread_id)).values["messages"])


def turns(target: Any, thread_id: str, count: int, *, mode: str = "delta", start: int = 0,
          from_checkpoint: str | None = None, snapshot_frequency: int = 4) -> None:
    """``count`` real turns (a tool call every 2nd turn); the first from ``from_checkpoint`` when given."""
    with saver_for(target) as saver:
        graph = agent_graph(saver, mode=mode, snapshot_frequency=snapshot_frequency, tool_every=2)
        for i in range(count):
            run_turn(graph, thread_id, human(start + i), checkpoint_id=from_checkpoint if i == 0 else None,
                     mode=mode)


def new_turn(target: Any, thread_id: str, turn: int, *, mode: str = "delta") -> list[Any]:
    """One more real turn on the head; returns the resulting message list."""
    with saver_for(target) as saver:
        graph = agent_graph(saver, mode=mode, snapshot_frequency=4, tool_every=2)
        return list(run_turn(graph, thread_id, human(turn), mode=mode)["messages"])


def duration_stamp(target: Any, thread_id: str) -> str:
    """DeerFlow's ``persist_run_durations`` shape on the head: a metadata-only clone of its values, via ``put``.

    Same channel values and versions as the head, ``source == "update"``, the
    run-history stamp in metadata and ``writes`` holding only
    ``runtime_run_duration`` (the Postgres savers drop ``writes``). Returns the new id.
    """
    with saver_for(target) as saver:
        head = saver.get_tuple(config_for(thread_id))
        checkpoint = dict(head.checkpoint)
        checkpoint["id"] = str(uuid6())
        metadata = {"source": "update", "step": head.metadata.get("step", 0) + 1, "parents": {},
                    "writes": {"persist_run_durations": {"runtime_run_duration": 1.25}},
                    "runtime_run_duration": 1.25}
        for key in ("deerflow_checkpoint_channel_mode",):
            if key in head.metadata:
                metadata[key] = head.metadata[key]
        stored = saver.put(head.config, checkpoint, metadata, {})
        return stored["configurable"]["checkpoint_id"]


def pending_write(target: Any, thread_id: str, checkpoint_id: str) -> None:
    """A write of an interrupted task stored under ``checkpoint_id`` (the saver's ``put_writes``)."""
    with saver_for(target) as saver:
        saver.put_writes(config_for(thread_id, checkpoint_id), [("messages", [AIMessage("half done", id="ai-x")])],
                         "task-interrupted")


def pending_writes_of(target: Any, thread_id: str, checkpoint_id: str) -> list[Any]:
    """The saver's pending writes of one checkpoint."""
    with saver_for(target) as saver:
        return list(saver.get_tuple(config_for(thread_id, checkpoint_id)).pending_writes or [])


def branched(target: Any, thread_id: str, *, mode: str = "delta") -> tuple[list[str], list[str]]:
    """A main line with a sibling branch off an older turn, the head back on the main line.

    Returns ``(main line ids after the fork point, oldest first; branch ids)``.
    """
    turns(target, thread_id, 4, mode=mode)
    main = ids(target, thread_id)
    fork_at = main[len(main) // 2]
    turns(target, thread_id, 1, mode=mode, start=50, from_checkpoint=fork_at)
    branch = sorted(set(ids(target, thread_id)) - set(main))
    turns(target, thread_id, 2, mode=mode, start=10, from_checkpoint=main[-1])
    return main, branch


@contextmanager
def copy_of(database: DatabaseConfig) -> Iterator[DatabaseConfig]:
    """A byte-identical copy of the Postgres database (``CREATE DATABASE ... TEMPLATE``), dropped afterwards."""
    source = psycopg.conninfo.conninfo_to_dict(database.postgres_url)["dbname"]
    name = f"{source}_copy"
    admin = psycopg.conninfo.make_conninfo(database.postgres_url, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (source,))
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=psycopg.conninfo.make_conninfo(
            database.postgres_url, dbname=name))
    finally:
        fixtures_real.drop_database(name)


def thread_calls(monkeypatch: Any, module: Any, name: str) -> list[str]:
    """The thread ids ``module.name(target, thread_id, ...)`` is called with from now on (it still runs)."""
    calls: list[str] = []
    real = getattr(module, name)

    def spy(target: Any, thread_id: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(thread_id)
        return real(target, thread_id, *args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls
