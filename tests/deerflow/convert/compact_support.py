"""Helpers for the compaction tests: stored rows in a comparable shape, replay depth, a plain DeltaChannel graph."""

from __future__ import annotations

import json
from typing import Annotated, Any

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.agents.thread_state import merge_message_writes
from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.digest import messages_sha256
from tests.deerflow.convert.support import execute

SERDE = JsonPlusSerializer()


def _v(version: Any) -> Any:
    """A channel version without LangGraph's random tail (``'0000...0003.0.527'`` -> 3)."""
    return int(str(version).split(".")[0]) if isinstance(version, str) else version


def _stored(value: Any) -> Any:
    if isinstance(value, _DeltaSnapshot):
        return ("snapshot", messages_sha256(value.value or []))
    if isinstance(value, list) and all(hasattr(m, "type") for m in value):
        return ("plain", messages_sha256(value))
    return value


def shape(database: DatabaseConfig, thread_id: str) -> list[dict[str, Any]]:
    """Every checkpoint of the thread (oldest first) as stored, ids, timestamps and version tails aside.

    Each item: ``step``, ``source``, ``metadata``, ``channel_values`` (SQLite: the
    decoded inline values; Postgres: the inline JSONB values plus each blob
    channel's stored value at its version, ``absent`` when no blob row), the
    channel versions and ``versions_seen`` (integer part), ``updated_channels``
    and the pending writes ``[(channel, value)]`` stored under it.
    """
    out = []
    if database.backend == "sqlite":
        rows = execute(database, "SELECT checkpoint_id, type, checkpoint, metadata FROM checkpoints "
                       "WHERE thread_id = ? ORDER BY checkpoint_id", (thread_id,))
        decoded = [(cid, SERDE.loads_typed((t, blob)), json.loads(meta)) for cid, t, blob, meta in rows]
        writes = execute(database, "SELECT checkpoint_id, channel, type, value FROM writes WHERE thread_id = ? "
                         "ORDER BY checkpoint_id, task_path, task_id, idx", (thread_id,))
        values = {cid: {k: _stored(v) for k, v in cp["channel_values"].items()} for cid, cp, _m in decoded}
    else:
        rows = execute(database, "SELECT checkpoint_id, checkpoint::text, metadata::text FROM checkpoints "
                       "WHERE thread_id = ? ORDER BY checkpoint_id", (thread_id,))
        decoded = [(cid, json.loads(cp), json.loads(meta)) for cid, cp, meta in rows]
        blobs = {(ch, ver): (t, blob) for ch, ver, t, blob in execute(
            database, "SELECT channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = ?", (thread_id,))}
        writes = execute(database, "SELECT checkpoint_id, channel, type, blob FROM checkpoint_writes "
                         "WHERE thread_id = ? ORDER BY checkpoint_id, task_path, task_id, idx", (thread_id,))
        values = {}
        for cid, cp, _m in decoded:
            inline = dict(cp["channel_values"])
            for ch, ver in cp["channel_versions"].items():
                blob = blobs.get((ch, ver))
                if blob is None:
                    if ch == "messages":
                        inline["messages@blob"] = "absent"
                    continue
                inline[ch + "@blob"] = "empty" if blob[0] == "empty" else _stored(SERDE.loads_typed(blob))
            values[cid] = inline
    by_cid: dict[str, list[Any]] = {}
    for cid, channel, t, blob in writes:
        value = SERDE.loads_typed((t, blob))
        by_cid.setdefault(cid, []).append((channel, _stored(value) if channel != "messages" else value))
    for cid, cp, meta in decoded:
        out.append({
            "step": meta.get("step"), "source": meta.get("source"), "metadata": meta,
            "channel_values": values[cid],
            "channel_versions": {k: _v(v) for k, v in cp["channel_versions"].items()},
            "versions_seen": {n: {k: _v(v) for k, v in seen.items()} for n, seen in cp["versions_seen"].items()},
            "updated_channels": cp.get("updated_channels"),
            "writes": by_cid.get(cid, []),
        })
    return out


def replay_depths(database: DatabaseConfig, thread_id: str) -> list[int]:
    """For each root-namespace checkpoint: ``messages`` updates a delta reader replays to read it.

    Walks parent links to the nearest checkpoint that stores a seed (a
    ``_DeltaSnapshot``, a plain list, or on Postgres any ``messages`` blob at
    its version), counting the checkpoints on the way whose messages version moved.
    """
    rows = shape(database, thread_id)
    ids = execute(database, "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = ? "
                  "AND checkpoint_ns = '' ORDER BY checkpoint_id", (thread_id,))
    parent = dict(ids)
    by_id = {cid: row for (cid, _p), row in zip(ids, rows, strict=True)}

    def seeded(row: dict[str, Any]) -> bool:
        values = row["channel_values"]
        stored = values.get("messages@blob", values.get("messages"))
        return isinstance(stored, tuple) or "messages" not in row["channel_versions"]

    depths = []
    for cid in by_id:
        depth, cur = 0, cid
        while cur is not None and not seeded(by_id[cur]):
            p = parent.get(cur)
            if p is None or by_id[p]["channel_versions"].get("messages") != by_id[cur]["channel_versions"]["messages"]:
                depth += 1
            cur = p
        depths.append(depth)
    return depths


class PlainDeltaState(TypedDict):
    """A state whose only channel is ``messages`` as a LangGraph ``DeltaChannel`` (no DeerFlow accessor)."""

    messages: Annotated[list, DeltaChannel(merge_message_writes, snapshot_frequency=10)]


def plain_delta_graph(saver: Any) -> Any:
    """A compiled LangGraph graph over :class:`PlainDeltaState`, for ``get_state`` reads only."""
    builder = StateGraph(PlainDeltaState)
    builder.add_node("noop", lambda state: {})
    builder.add_edge(START, "noop")
    return builder.compile(checkpointer=saver)
