"""Storage accounting equals direct SQL sums over LangGraph's tables, thread by thread and per mode.

Direct sums are written out here, one table at a time, with the size
definitions of ``deerflow.convert``'s ``stored_bytes`` (Postgres:
``pg_column_size`` of the checkpoint row, ``LENGTH`` of blob and write
values; SQLite: ``LENGTH`` of checkpoint, metadata and write values).
"""

from __future__ import annotations

import pytest

from deerflow import inventory
from deerflow.inventory import footprint
from deerflow.storage import reader_for
from deerflow.storage.savers import open_checkpointer
from deerflow.storage.sessions import open_session
from tests.backends import BACKENDS
from tests.scale.conftest import walk

DIRECT = {
    "postgres": {
        "bytes_checkpoints": "SELECT thread_id, SUM(pg_column_size(checkpoint) + pg_column_size(metadata)) AS b "
                             "FROM checkpoints GROUP BY thread_id",
        "bytes_blobs": "SELECT thread_id, SUM(LENGTH(blob)) AS b FROM checkpoint_blobs GROUP BY thread_id",
        "bytes_writes": "SELECT thread_id, SUM(LENGTH(blob)) AS b FROM checkpoint_writes GROUP BY thread_id",
    },
    "sqlite": {
        "bytes_checkpoints": "SELECT thread_id, SUM(LENGTH(checkpoint) + LENGTH(metadata)) AS b "
                             "FROM checkpoints GROUP BY thread_id",
        "bytes_writes": "SELECT thread_id, SUM(LENGTH(value)) AS b FROM writes GROUP BY thread_id",
    },
}


def _direct(saver, backend: str) -> dict[str, dict[str, int]]:
    reader = reader_for(saver)
    return {field: {r["thread_id"]: int(r["b"] or 0) for r in reader.query(sql)}
            for field, sql in DIRECT[backend].items()}


def _check(saver, backend: str, database) -> list[inventory.ThreadSummary]:
    listed = walk(saver)
    direct = _direct(saver, backend)
    for s in listed:
        for field, sums in direct.items():
            assert getattr(s, field) == sums.get(s.thread_id, 0), (s.thread_id, field)
        if backend == "sqlite":
            assert s.bytes_blobs == 0
    # The converter's own figure for a thread is the same total.
    with open_session(database) as session:
        for s in listed[:5]:
            assert session.stored_bytes(s.thread_id) == s.bytes_total
    totals = inventory.storage_by_mode(saver)
    for mode in ("full", "delta"):
        mine = [s for s in listed if s.mode == mode]
        assert totals[mode]["threads"] == len(mine)
        assert totals[mode]["bytes_total"] == sum(s.bytes_total for s in mine)
        assert totals[mode]["bytes_writes"] == sum(s.bytes_writes for s in mine)
    # The audit reads one GROUP BY per class and derives the census and the per-mode totals from it.
    by_class = inventory.storage_by_class(saver)
    assert inventory.mode_totals(by_class) == totals
    assert {c: by_class[c]["threads"] for c in inventory.THREAD_CLASSES} == inventory.class_counts(saver)
    return listed


@pytest.mark.parametrize("backend", BACKENDS)
def test_fixture_storage_equals_direct_sums(backend, request):
    database = request.getfixturevalue(f"{backend}_fixture_db_rw")
    with open_checkpointer(database) as saver:
        listed = _check(saver, backend, database)
        heaviest, _ = inventory.list_threads(saver, limit=3, sort="bytes")
        assert [s.thread_id for s in heaviest] == [s.thread_id for s in sorted(
            listed, key=lambda s: (s.bytes_total, s.thread_id), reverse=True)[:3]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_seeded_storage_equals_direct_sums(seeded, backend):
    database, _ = seeded(backend, threads=40, mode="mixed")
    with open_checkpointer(database) as saver:
        _check(saver, backend, database)


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_checkpoint_bytes_add_up_to_the_thread(seeded, backend):
    database, report = seeded(backend, threads=12, mode="mixed")
    with open_checkpointer(database) as saver:
        for sample in report.samples:
            row = inventory.get_thread_summary(saver, sample.thread_id)
            series = footprint.checkpoint_bytes(saver, sample.thread_id)
            assert len(series) == row.checkpoint_count
            assert [c.checkpoint_id for c in series] == sorted(c.checkpoint_id for c in series)
            assert sum(c.checkpoint for c in series) == row.bytes_checkpoints
            assert sum(c.writes for c in series) == row.bytes_writes
            assert sum(c.blobs for c in series) == row.bytes_blobs  # every seeded blob is referenced


@pytest.mark.parametrize("backend", BACKENDS)
def test_replay_depth_is_the_heads_update_counter(seeded, backend):
    database, _ = seeded(backend, threads=30, mode="mixed")
    with open_checkpointer(database) as saver:
        for s in walk(saver):
            head = saver.get_tuple({"configurable": {"thread_id": s.thread_id, "checkpoint_ns": "",
                                                     "checkpoint_id": s.head_checkpoint_id}})
            counters = (head.metadata.get("counters_since_delta_snapshot") or {}).get("messages")
            if counters:
                assert s.replay_depth == counters[0]
            elif head.metadata.get("deerflow_checkpoint_channel_mode") == "delta":
                assert s.replay_depth == 0  # a snapshot head
            else:
                assert s.replay_depth is None
