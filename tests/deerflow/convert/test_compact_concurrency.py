"""A live writer during compaction: a delta-mode DeerFlow process appending turns loses nothing.

Postgres: a turn that commits inside the compaction's transaction (after the
rewrite and verification, before commit) moves the watermark: the attempt
rolls back and the retry compacts around the newcomer. Both backends: a
writer thread appends turns throughout a compaction; afterwards every turn is
there and every older checkpoint reads as before.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from deerflow.convert.compactor import compact_thread
from tests.deerflow.convert.support import (
    agent_graph,
    backup_ids,
    human,
    messages_at,
    open_saver,
    readings,
    run_turn,
)

THREAD = "busy"
K = 4


def _full_thread(db, turns: int = 12) -> None:
    with open_saver(db) as saver:
        graph = agent_graph(saver, mode="full", snapshot_frequency=K, tool_every=2)
        for t in range(turns):
            run_turn(graph, THREAD, human(t), mode="full")


def _delta_turn(db, turn: int) -> None:
    """One turn of a delta-mode DeerFlow process at cadence K, on its own connection (committed on return)."""
    with open_saver(db) as saver:
        run_turn(agent_graph(saver, mode="delta", snapshot_frequency=K, tool_every=2), THREAD, human(turn),
                 mode="delta")


@pytest.mark.postgres
def test_a_turn_committed_before_commit_is_retried_and_kept(empty_postgres_db):
    db = empty_postgres_db
    _full_thread(db)
    before = readings(db, THREAD, "full")
    head_before = [m.id for m in messages_at(db, THREAD, mode="full")]
    turns: list[int] = []

    def hook(session: Any) -> None:
        if not turns:
            turns.append(100)
            _delta_turn(db, 100)

    report = compact_thread(db, THREAD, snapshot_frequency=K, before_commit=hook)

    assert report.status == "compacted" and report.attempts == 2, report.error
    assert backup_ids(db) == [report.backup_id]
    after = readings(db, THREAD, "delta")
    assert {k: v for k, v in after.items() if k in before} == before
    head = [m.id for m in messages_at(db, THREAD, mode="delta")]
    assert head[:len(head_before)] == head_before and "h-100" in head and len(head) > len(head_before)
    # the seam: the last legacy checkpoint the writer's turn replays from stores a snapshot
    assert "seam" in {p["reason"] for p in report.snapshot_positions}


def test_a_writer_appending_throughout_loses_nothing(scratch_db):
    _full_thread(scratch_db)
    before = readings(scratch_db, THREAD, "full")
    head_before = [m.id for m in messages_at(scratch_db, THREAD, mode="full")]
    written: list[int] = []
    errors: list[BaseException] = []
    go = threading.Event()

    def writer() -> None:
        go.wait()
        try:
            for turn in range(200, 206):
                _delta_turn(scratch_db, turn)
                written.append(turn)
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    go.set()
    reports = [compact_thread(scratch_db, THREAD, snapshot_frequency=K, max_attempts=10)]
    thread.join(120)
    assert not thread.is_alive() and errors == [] and written == list(range(200, 206))
    assert reports[0].status in ("compacted", "already_delta"), reports[0].error
    # whatever the interleaving, a second compaction finds nothing (left) to do or compacts the rest
    reports.append(compact_thread(scratch_db, THREAD, snapshot_frequency=K))
    assert reports[-1].status in ("compacted", "already_delta"), reports[-1].error
    assert "compacted" in [r.status for r in reports]
    after = readings(scratch_db, THREAD, "delta")
    assert {k: v for k, v in after.items() if k in before} == before
    head = [m.id for m in messages_at(scratch_db, THREAD, mode="delta")]
    assert head[:len(head_before)] == head_before
    assert [i for i in head[len(head_before):] if i.startswith("h-")] == [f"h-{t}" for t in range(200, 206)]
