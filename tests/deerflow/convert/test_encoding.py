"""Encoding: message content with NUL bytes and non-BMP characters survives conversion on both backends
(Postgres keeps it in ``bytea`` blobs, never in JSONB), and a ``_DeltaSnapshot`` stays one through a
backup and a revert."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert import convert_thread, revert_thread
from tests.deerflow.convert.support import (
    agent_graph,
    convert_and_compare,
    execute,
    human,
    messages_at,
    open_saver,
    raw_rows,
    run_turn,
    stored_tuples,
)

NASTY = "nul\x00byte, emoji \U0001F600, clef \U0001D11E, plane-16 \U0010FFFD, rtl \u202eevil\u202c, \ud7ff end"
BLOCKS = [{"type": "text", "text": "block\x00with nul \U0001F389"}, {"type": "text", "text": "\U00020000 CJK ext B"}]


def test_nul_bytes_and_non_bmp_content_survive(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver)
        run_turn(graph, "enc", HumanMessage(NASTY, id="nasty"))
        run_turn(graph, "enc", HumanMessage(BLOCKS, id="blocks"))
        saver.put_writes({"configurable": {"thread_id": "enc", "checkpoint_ns": "",
                                           "checkpoint_id": saver.get_tuple({"configurable": {
                                               "thread_id": "enc", "checkpoint_ns": ""}}).config["configurable"][
                                               "checkpoint_id"]}},
                         [("messages", [AIMessage("", id="call", tool_calls=[
                             {"name": "t\x00", "args": {"q": "\x00\U0001F600"}, "id": "c\x00"}])])], "extra")
        run_turn(graph, "enc", human(3))
    before = {m.id: (m.content, getattr(m, "tool_calls", None)) for m in messages_at(scratch_db, "enc", mode="delta")}
    assert before["nasty"][0] == NASTY and before["blocks"][0] == BLOCKS

    convert_and_compare(scratch_db, "enc")

    after = {m.id: (m.content, getattr(m, "tool_calls", None)) for m in messages_at(scratch_db, "enc", mode="full")}
    assert after == before
    stored = stored_tuples(scratch_db, "enc")[0].checkpoint["channel_values"]["messages"]
    assert [m.content for m in stored if m.id in ("nasty", "blocks")] == [NASTY, BLOCKS]
    if scratch_db.backend == "postgres":
        # the message list lives in bytea blobs; no JSONB document holds message content
        assert not execute(scratch_db, "SELECT 1 FROM checkpoints WHERE thread_id = 'enc' "
                           "AND (checkpoint::text LIKE '%byte%' OR metadata::text LIKE '%byte%')")


def test_delta_snapshot_round_trips_through_backup_and_revert(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, snapshot_frequency=2)
        for t in range(3):
            run_turn(graph, "snap", human(t, content=f"t{t} \x00 \U0001F600"))
        serde = saver.serde
    original = raw_rows(scratch_db, "snap")
    snapshots = {t.config["configurable"]["checkpoint_id"]: t.checkpoint["channel_values"]["messages"]
                 for t in stored_tuples(scratch_db, "snap")
                 if isinstance(t.checkpoint["channel_values"].get("messages"), _DeltaSnapshot)}
    assert len(snapshots) >= 2

    report = convert_thread(scratch_db, "snap")
    assert report.status == "converted"

    # the backup holds the snapshots as msgpack extension values that load back as _DeltaSnapshot
    if scratch_db.backend == "sqlite":
        rows = execute(scratch_db, "SELECT checkpoint_id, type, checkpoint FROM dfa_backup_checkpoints "
                       "WHERE backup_id = ?", (report.backup_id,))
        backed = {cid: serde.loads_typed((type_, blob))["channel_values"].get("messages") for cid, type_, blob in rows}
    else:
        versions = {t.config["configurable"]["checkpoint_id"]: t.checkpoint["channel_versions"]["messages"]
                    for t in stored_tuples(scratch_db, "snap")
                    if t.config["configurable"]["checkpoint_id"] in snapshots}
        rows = execute(scratch_db, "SELECT version, type, blob FROM dfa_backup_blobs WHERE backup_id = ? "
                       "AND channel = 'messages' AND type <> 'empty'", (report.backup_id,))
        by_version = {version: serde.loads_typed((type_, blob)) for version, type_, blob in rows}
        backed = {cid: by_version.get(v) for cid, v in versions.items()}
    for cid, snapshot in snapshots.items():
        assert isinstance(backed[cid], _DeltaSnapshot)
        assert [(m.id, m.content) for m in backed[cid].value] == [(m.id, m.content) for m in snapshot.value]

    assert revert_thread(scratch_db, report.backup_id).status == "reverted"
    assert raw_rows(scratch_db, "snap") == original
    restored = {t.config["configurable"]["checkpoint_id"]: t.checkpoint["channel_values"].get("messages")
                for t in stored_tuples(scratch_db, "snap")}
    assert all(isinstance(restored[cid], _DeltaSnapshot) for cid in snapshots)
