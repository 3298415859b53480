"""Row shape: a compacted full thread is stored exactly as a delta-mode DeerFlow process stores the same turns.

The same turns go through a real full-mode graph (then compacted) and a real
delta-mode graph at the same cadence, on each backend; every stored row is
compared field by field, checkpoint ids, timestamps and the random tail of
channel versions aside.
"""

from __future__ import annotations

import pytest

from deerflow.convert.compactor import compact_thread
from tests.deerflow.convert.compact_support import replay_depths, shape
from tests.deerflow.convert.support import agent_graph, human, open_saver, run_turn


def _write(db, thread_id: str, mode: str, turns: int, k: int) -> None:
    with open_saver(db) as saver:
        graph = agent_graph(saver, mode=mode, snapshot_frequency=k, tool_every=3)
        for t in range(turns):
            run_turn(graph, thread_id, human(t), mode=mode)


@pytest.mark.parametrize("k", [3, 10])
def test_compacted_rows_are_what_delta_mode_writes(scratch_db, k):
    _write(scratch_db, "full", "full", 14, k)
    _write(scratch_db, "delta", "delta", 14, k)
    report = compact_thread(scratch_db, "full", snapshot_frequency=k)
    assert report.status == "compacted", report.error
    got, want = shape(scratch_db, "full"), shape(scratch_db, "delta")
    assert len(got) == len(want) == report.checkpoints_total
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"checkpoint {i} (step {w['step']}, {w['source']}) differs"
    # snapshots where delta mode put them, and the report names them
    # SQLite: the decoded inline value; Postgres: the inline ``true`` snapshot marker
    steps = [w["step"] for w in want
             if w["channel_values"].get("messages") in (True,)
             or isinstance(w["channel_values"].get("messages"), tuple)]
    assert len(steps) >= 14 * 2 // k and [p["step"] for p in report.snapshot_positions] == steps
    assert all(w["metadata"]["deerflow_checkpoint_channel_mode"] == "delta" for w in want)
    assert {p["reason"] for p in report.snapshot_positions} == {"cadence"}
    assert max(replay_depths(scratch_db, "full")) <= k
    assert report.bytes_after < report.bytes_before and report.bytes_freed == report.bytes_before - report.bytes_after


def test_a_fork_and_an_overwrite_get_their_own_snapshots(scratch_db):
    """A turn forked from an older checkpoint and a DeerFlow-style Overwrite of ``messages`` cannot be replayed
    from the writes: compaction stores a snapshot there, and every checkpoint still reads as before."""
    from langgraph.types import Overwrite

    from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
    from tests.deerflow.convert.support import checkpoint_ids, readings

    _write(scratch_db, "t", "full", 6, 10)
    fork_from = checkpoint_ids(scratch_db, "t")[-8]
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, mode="full", tool_every=3)
        run_turn(graph, "t", human(50), checkpoint_id=fork_from, mode="full")
        CheckpointStateAccessor.for_saver(saver, mode="full").update(
            {"configurable": {"thread_id": "t"}}, {"messages": Overwrite([human(99)])})
        run_turn(graph, "t", human(7), mode="full")
    before = readings(scratch_db, "t", "full")
    report = compact_thread(scratch_db, "t", snapshot_frequency=10)
    assert report.status == "compacted", report.error
    assert {p["reason"] for p in report.snapshot_positions} >= {"writes"}
    assert readings(scratch_db, "t", "delta") == before
    assert max(replay_depths(scratch_db, "t")) <= 10
