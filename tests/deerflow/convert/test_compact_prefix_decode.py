"""Compaction with the shared-prefix decoding gives exactly the rows it gives without it, and a checkpoint whose
stored list was edited mid-chain (bytes that are no prefix of the list read next to it) still gets its snapshot."""

from __future__ import annotations

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import copy_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.types import Overwrite

from deerflow.convert.compactor import compact_thread
from deerflow.convert.shared_prefix import PrefixDecoder
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.compact_support import shape
from tests.deerflow.convert.support import (
    agent_graph,
    checkpoint_ids,
    config_for,
    human,
    open_saver,
    readings,
    run_turn,
)


def _edited(messages: list, i: int, text: str) -> list:
    out = list(messages)
    out[i] = HumanMessage(text, id=messages[i].id)
    return out


def _thread(db, thread_id: str) -> str:
    """Full-mode turns with two mid-chain edits; returns the id of the checkpoint the writes do not explain.

    * an ``update_state`` ``Overwrite`` whose list edits a middle message (explained by its pending write);
    * a checkpoint ``put`` on top of the head with a middle message edited and no write under its parent (as a
      summarization that replaced the list in place would leave it).
    """
    with open_saver(db) as saver:
        graph = agent_graph(saver, mode="full", tool_every=3)
        for t in range(5):
            run_turn(graph, thread_id, human(t), mode="full")
        accessor = CheckpointStateAccessor.for_saver(saver, mode="full")
        head = saver.get_tuple(config_for(thread_id))
        accessor.update(config_for(thread_id), {"messages": Overwrite(_edited(
            head.checkpoint["channel_values"]["messages"], 3, "edited through update_state"))})
        for t in range(5, 8):
            run_turn(graph, thread_id, human(t), mode="full")
        head = saver.get_tuple(config_for(thread_id))
        checkpoint = copy_checkpoint(head.checkpoint)
        checkpoint["id"] = str(uuid6(clock_seq=1))
        checkpoint["channel_values"]["messages"] = _edited(checkpoint["channel_values"]["messages"], 5,
                                                           "replaced without a write")
        version = saver.get_next_version(checkpoint["channel_versions"]["messages"], None)
        checkpoint["channel_versions"]["messages"] = version
        checkpoint["updated_channels"] = ["messages"]
        saver.put(head.config, checkpoint, {"source": "update", "step": head.metadata["step"] + 1, "parents": {}},
                  {"messages": version})
        for t in range(8, 12):
            run_turn(graph, thread_id, human(t), mode="full")
    return checkpoint["id"]


def test_prefix_decoding_changes_nothing_and_edits_get_snapshots(scratch_db, monkeypatch):
    edited = _thread(scratch_db, "on")
    assert _thread(scratch_db, "off") != edited
    before = readings(scratch_db, "on", "full")
    decoders: list[PrefixDecoder] = []
    init = PrefixDecoder.__init__

    def keep(self, decode):
        init(self, decode)
        decoders.append(self)

    monkeypatch.setattr(PrefixDecoder, "__init__", keep)
    on = compact_thread(scratch_db, "on", snapshot_frequency=10)
    assert on.status == "compacted", on.error
    counts = {k: sum(d.counts[k] for d in decoders) for k in ("full", "prefix", "tail")}
    # most stored lists (Postgres: blobs; SQLite: inside the checkpoint rows) are sliced from a newer one's
    assert counts["prefix"] >= len(checkpoint_ids(scratch_db, "on")) * 3 // 4, counts
    monkeypatch.setattr(PrefixDecoder, "KEEP", 0)  # no list kept to compare with: every list decoded in full
    decoders.clear()
    off = compact_thread(scratch_db, "off", snapshot_frequency=10)
    assert off.status == "compacted", off.error
    assert sum(d.counts["prefix"] + d.counts["tail"] for d in decoders) == 0
    assert shape(scratch_db, "on") == shape(scratch_db, "off")
    assert [(p["step"], p["reason"]) for p in on.snapshot_positions] == \
        [(p["step"], p["reason"]) for p in off.snapshot_positions]
    # the list the writes do not explain is stored as a snapshot there
    at = [p for p in on.snapshot_positions if p["checkpoint_id"] == edited]
    assert [p["reason"] for p in at] == ["writes"]
    row = dict(zip(sorted(checkpoint_ids(scratch_db, "on")), shape(scratch_db, "on"), strict=True))[edited]
    stored = row["channel_values"].get("messages@blob", row["channel_values"].get("messages"))
    assert isinstance(stored, tuple) and stored[0] == "snapshot"
    assert readings(scratch_db, "on", "delta") == before
