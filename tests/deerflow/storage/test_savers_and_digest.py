"""deerflow.storage.savers (the saver a ``database:`` block names) and
deerflow.convert.digest (the manifest's digest)."""

from __future__ import annotations

import asyncio
import hashlib
import json

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.digest import EMPTY_MESSAGES_SHA256, canonical_messages, channels_sha256, messages_sha256
from deerflow.errors import ConfigError
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.savers import (
    open_async_checkpointer,
    open_checkpointer,
    postgres_connect_kwargs,
    sqlite_checkpoint_path,
)
from tests import fixtures_real
from tests.deerflow.support import build_agent_graph, config_for, run_turn

# -- savers --------------------------------------------------------------------------


def test_memory_backend():
    with open_checkpointer(DatabaseConfig(backend="memory")) as saver:
        assert isinstance(saver, InMemorySaver)

    async def opened() -> type:
        async with open_async_checkpointer(DatabaseConfig(backend="memory")) as saver:
            return type(saver)

    assert asyncio.run(opened()) is InMemorySaver


def test_sqlite_backend_opens_sqlite_dir_deerflow_db(tmp_path):
    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "nested" / "dir"))
    assert sqlite_checkpoint_path(database) == tmp_path / "nested" / "dir" / "deerflow.db"
    with pytest.raises(ConfigError) as info:
        with open_checkpointer(database):
            pass
    assert (str(tmp_path / "nested" / "dir" / "deerflow.db") in str(info.value)
            and info.value.key == "database.sqlite_dir")

    async def missing() -> None:
        async with open_async_checkpointer(database):
            pass

    with pytest.raises(ConfigError, match="does not exist"):
        asyncio.run(missing())
    assert not (tmp_path / "nested").exists()  # nothing created without create=True

    with open_checkpointer(database, create=True) as saver:
        assert isinstance(saver, SqliteSaver)
        run_turn(build_agent_graph("full", saver), "s", "full", 1)
    assert sqlite_checkpoint_path(database).exists()

    async def reopen() -> int:
        async with open_async_checkpointer(database) as saver:
            assert isinstance(saver, AsyncSqliteSaver)
            return len((await CheckpointStateAccessor.for_saver(saver, mode="full").aget(config_for("s")))
                       .values["messages"])

    assert asyncio.run(reopen()) == 2


def test_postgres_connect_kwargs():
    kwargs = postgres_connect_kwargs(DatabaseConfig(backend="postgres", postgres_url="postgresql://x/y"))
    assert kwargs["autocommit"] is True and kwargs["prepare_threshold"] == 0
    assert kwargs["row_factory"] is psycopg.rows.dict_row
    assert "options" not in kwargs
    schema = postgres_connect_kwargs(DatabaseConfig(backend="postgres", postgres_url="postgresql://x/y",
                                                    postgres_schema="deer"))
    assert schema["options"] == "-c search_path=deer"


@pytest.mark.postgres
def test_postgres_backend_sync_and_async_with_schema():
    name, url = fixtures_real.create_database("dfa_saver")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA deer")
        database = DatabaseConfig(backend="postgres", postgres_url=url, postgres_schema="deer")
        with open_checkpointer(database, create=True) as saver:
            assert isinstance(saver, PostgresSaver)
            run_turn(build_agent_graph("delta", saver), "p", "delta", 1)
        with psycopg.connect(url, autocommit=True) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'deer'")}
            public = {r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")}
        assert {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"} <= tables
        assert "checkpoints" not in public

        async def reopen() -> int:
            async with open_async_checkpointer(database) as saver:
                assert isinstance(saver, AsyncPostgresSaver)
                snapshot = await CheckpointStateAccessor.for_saver(saver, mode="delta").aget(config_for("p"))
                return len(snapshot.values["messages"])

        assert asyncio.run(reopen()) == 2
    finally:
        fixtures_real.drop_database(name)


# -- digest -------------------------------------------------------------------------


def test_canonical_form_follows_the_manifest_definition():
    messages = [
        HumanMessage("hi", id="h", name="user-1"),
        AIMessage([{"type": "text", "text": "blocks"}], id="a",
                  tool_calls=[{"name": "t", "args": {"q": 1}, "id": "c1", "type": "tool_call"}]),
        ToolMessage("out", tool_call_id="c1", id="t"),
    ]
    assert canonical_messages(messages) == [
        {"type": "human", "id": "h", "name": "user-1", "content": "hi", "tool_call_id": None, "tool_calls": []},
        {"type": "ai", "id": "a", "name": None, "content": [{"type": "text", "text": "blocks"}], "tool_call_id": None,
         "tool_calls": [{"name": "t", "args": {"q": 1}, "id": "c1"}]},
        {"type": "tool", "id": "t", "name": None, "content": "out", "tool_call_id": "c1", "tool_calls": []},
    ]
    text = json.dumps(canonical_messages(messages), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert messages_sha256(messages) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert EMPTY_MESSAGES_SHA256 == hashlib.sha256(b"[]").hexdigest() == messages_sha256(None) == messages_sha256([])
    assert channels_sha256({"messages": messages, "title": "é"}) == hashlib.sha256('{"title":"é"}'.encode()).hexdigest()


def test_digest_reproduces_the_manifest_head_state(sqlite_fixture_db, manifest):
    """head_state holds the full canonical head messages wherever the backends agree."""
    checked = 0
    with open_checkpointer(sqlite_fixture_db) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
        for thread in manifest["threads"]:
            head_state = thread["backend_independent"].get("head_state")
            if not head_state:
                continue
            values = accessor.get(config_for(thread["thread_id"])).values
            assert canonical_messages(values.get("messages")) == head_state["messages"], thread["thread_id"]
            assert {k: v for k, v in values.items() if k != "messages"} == head_state["channels"], thread["thread_id"]
            checked += 1
    assert checked >= 25
