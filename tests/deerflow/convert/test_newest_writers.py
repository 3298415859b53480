"""Threads written by the newest writers are classed, read, converted, compacted and pruned right.

* **Today's LangGraph** (the release installed, a real graph over DeerFlow's thread schema on the real
  saver): a delta thread whose cadence snapshots drop ``counters_since_delta_snapshot``, with a turn forked
  by ``invoke`` from an older checkpoint and a state edit forked by ``update_state``, which stores a
  ``_DeltaSnapshot`` at the fork point; and a full-mode thread with the same forks.
* **LangGraph.js** (its metadata as documented: ``delta_writes_versioned: true`` on every checkpoint of a
  branch its ``DeltaChannel`` graphs start, as LangGraph's own ``prune`` recognizes delta threads; no DeerFlow
  marker; counters dropped at snapshot checkpoints), written with the saver's own ``put`` / ``put_writes``.

Every rewrite must leave every checkpoint it keeps reading through LangGraph's reader exactly as before
(digests of messages and of every channel); both backends.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from deerflow import inventory
from deerflow.convert import convert_thread, dry_run_thread, revert_thread
from deerflow.convert.compactor import compact_thread
from deerflow.errors import CheckpointModeMismatchError
from deerflow.retention import keep_last, revert_prune, safe_only
from deerflow.runtime.checkpoint_mode import (
    COUNTERS_METADATA_KEY,
    DELTA_WRITES_VERSIONED_METADATA_KEY,
    checkpoint_metadata_uses_delta,
    inject_checkpoint_mode,
    raise_if_checkpoint_tuple_incompatible,
)
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.support import (
    ABSENT,
    Crafter,
    agent_graph,
    checkpoint_ids,
    config_for,
    human,
    open_saver,
    raw_rows,
    readings,
    run_turn,
    stored_tuples,
)

Reading = tuple[int, str, str]


def _newest_langgraph_thread(database: Any, thread_id: str, mode: str) -> None:
    """12 turns at cadence 4, a turn forked from the 3rd turn's head, a state edit forked from the 5th's."""
    with open_saver(database) as saver:
        graph = agent_graph(saver, mode=mode, snapshot_frequency=4, tool_every=3)
        heads = []
        for t in range(12):
            run_turn(graph, thread_id, human(t), mode=mode)
            heads.append(checkpoint_ids(database, thread_id)[-1])
        run_turn(graph, thread_id, human(50), checkpoint_id=heads[2], mode=mode)
        fork = inject_checkpoint_mode({"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                                        "checkpoint_id": heads[4]}}, mode)
        CheckpointStateAccessor.for_saver(saver, mode=mode).update(fork, {"messages": [human(60)]})
        run_turn(graph, thread_id, human(61), mode=mode)


def _langgraph_js_thread(database: Any, thread_id: str) -> list[str]:
    """A LangGraph.js-shaped delta thread: 8 turns, snapshots every 4 updates (counters dropped there),
    ``delta_writes_versioned`` on every checkpoint, no DeerFlow marker; returns the ids oldest first."""
    with open_saver(database) as saver:
        c = Crafter(saver, thread_id)
        ids = [c.checkpoint(None, bump=False, marker=False)]
        value: list[Any] = []
        updates = 0
        for t in range(8):
            for message in (HumanMessage(f"q{t}", id=f"h{t}"), AIMessage(f"a{t}", id=f"a{t}")):
                c.writes(ids[-1], f"task-{len(ids)}", [message])
                value = [*value, message]
                updates += 1
                snapshot = updates == 4
                ids.append(c.checkpoint(ids[-1], marker=False, messages=_snapshot(value) if snapshot else ABSENT))
                _restamp(saver, thread_id, ids[-1], None if snapshot else updates)
                updates = 0 if snapshot else updates
        return ids


def _snapshot(value: list[Any]) -> Any:
    from deerflow._langgraph_compat import _DeltaSnapshot

    return _DeltaSnapshot(list(value))


def _restamp(saver: Any, thread_id: str, checkpoint_id: str, updates: int | None) -> None:
    """Put the checkpoint again with LangGraph.js's metadata: the versioned flag, counters off snapshots."""
    tup = saver.get_tuple(config_for(thread_id, checkpoint_id))
    metadata = {k: v for k, v in tup.metadata.items() if k != COUNTERS_METADATA_KEY}
    metadata[DELTA_WRITES_VERSIONED_METADATA_KEY] = True
    if updates is not None:
        metadata[COUNTERS_METADATA_KEY] = {"messages": [updates, updates]}
    parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
    versions = dict(tup.checkpoint["channel_versions"])
    saver.put(config_for(thread_id, parent), tup.checkpoint, metadata, versions)


def _class(database: Any, thread_id: str) -> str:
    with open_saver(database) as saver:
        summary = inventory.get_thread_summary(saver, thread_id)
        assert summary is not None
        return str(summary.thread_class)


def _assert_the_reader_gates_and_reads(database: Any, thread_id: str, head: str, count: int) -> None:
    """The dashboard's reader: a full-mode process refuses the thread (409), a delta-mode one reads the head."""
    from deerflow.reader import ThreadReader

    with open_saver(database) as saver:
        full = ThreadReader(saver, CheckpointStateAccessor.for_saver(saver, mode="full"), "full", 10)
        with pytest.raises(CheckpointModeMismatchError):
            full.read_state(thread_id, head)
        delta = ThreadReader(saver, CheckpointStateAccessor.for_saver(saver, mode="delta"), "delta", 10)
        view = delta.read_state(thread_id)
        assert len(view.values["messages"]) == count and not view.findings


def _kept_read_as_before(database: Any, thread_id: str, before: dict[tuple[str, str], Reading],
                         mode: str = "delta") -> None:
    after = readings(database, thread_id, mode)
    assert after, thread_id
    assert {k: before[k] for k in after} == after


def _assert_rewrites_keep_every_reading(database: Any, thread_id: str) -> None:
    """Dry run (integrity), conversion, revert, keep_last, safe_only: every kept checkpoint reads as before."""
    before = readings(database, thread_id, "delta")
    original = raw_rows(database, thread_id)
    assert dry_run_thread(database, thread_id).status == "needs_conversion"  # our reading agrees with LangGraph's
    report = convert_thread(database, thread_id)
    assert report.status == "converted", (report.error, report.first_difference)
    assert not [f for f in report.findings if f["blocking"] or f["kind"] == "reader_departure"]
    assert readings(database, thread_id, "full") == before
    assert _class(database, thread_id) == "full"
    assert revert_thread(database, report.backup_id).status == "reverted"
    assert raw_rows(database, thread_id) == original

    pruned = keep_last(database, thread_id, 3)
    assert pruned.status == "pruned", (pruned.error, pruned.first_difference)
    _kept_read_as_before(database, thread_id, before)
    assert revert_prune(database, pruned.backup_id).status == "reverted"
    assert raw_rows(database, thread_id) == original
    cleaned = safe_only(database, thread_id)
    assert cleaned.status in ("pruned", "nothing_to_prune"), (cleaned.error, cleaned.first_difference)
    _kept_read_as_before(database, thread_id, before)


def test_todays_langgraph_delta_thread(scratch_db):
    _newest_langgraph_thread(scratch_db, "newest-delta", "delta")
    tuples = stored_tuples(scratch_db, "newest-delta")
    snapshots = [t for t in tuples if type(t.checkpoint["channel_values"].get("messages")).__name__ == "_DeltaSnapshot"]
    # the writer's shape: a snapshot checkpoint drops the counters (Postgres also hands the snapshot's blob
    # to the next input checkpoint, which shares its version); the update_state fork stores a snapshot
    dropped = [t for t in snapshots if COUNTERS_METADATA_KEY not in t.metadata]
    assert len(dropped) >= 3 and {t.metadata.get("source") for t in dropped} == {"loop", "update"}
    assert _class(scratch_db, "newest-delta") == "delta"
    head = checkpoint_ids(scratch_db, "newest-delta")[-1]
    _assert_the_reader_gates_and_reads(scratch_db, "newest-delta", head, readings(
        scratch_db, "newest-delta", "delta")[("", head)][0])
    with open_saver(scratch_db) as saver:
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        with pytest.raises(CheckpointModeMismatchError):
            full.get(config_for("newest-delta"))
    _assert_rewrites_keep_every_reading(scratch_db, "newest-delta")


def test_todays_langgraph_full_thread_compacts_and_prunes(scratch_db):
    _newest_langgraph_thread(scratch_db, "newest-full", "full")
    assert _class(scratch_db, "newest-full") == "full"
    before = readings(scratch_db, "newest-full", "delta")
    assert readings(scratch_db, "newest-full", "full") == before
    original = raw_rows(scratch_db, "newest-full")
    report = compact_thread(scratch_db, "newest-full", snapshot_frequency=4)
    assert report.status == "compacted", (report.error, report.first_difference)
    assert readings(scratch_db, "newest-full", "delta") == before
    assert _class(scratch_db, "newest-full") in ("delta", "migrated")
    pruned = keep_last(scratch_db, "newest-full", 3)
    assert pruned.status == "pruned", (pruned.error, pruned.first_difference)
    _kept_read_as_before(scratch_db, "newest-full", before)
    assert revert_prune(scratch_db, pruned.backup_id).status == "reverted"
    assert revert_thread(scratch_db, report.backup_id).status == "reverted"
    assert raw_rows(scratch_db, "newest-full") == original


def test_a_langgraph_js_thread_is_delta(scratch_db):
    ids = _langgraph_js_thread(scratch_db, "js-delta")
    tuples = {t.config["configurable"]["checkpoint_id"]: t for t in stored_tuples(scratch_db, "js-delta")}
    head = tuples[ids[-1]]
    assert COUNTERS_METADATA_KEY not in head.metadata  # a snapshot head: only LangGraph.js's flag tells delta
    assert checkpoint_metadata_uses_delta(head.metadata)
    with pytest.raises(CheckpointModeMismatchError):
        raise_if_checkpoint_tuple_incompatible(head, "full")
    assert _class(scratch_db, "js-delta") == "delta_counters_only"
    _assert_the_reader_gates_and_reads(scratch_db, "js-delta", ids[-1], 16)
    before = readings(scratch_db, "js-delta", "delta")
    assert before[("", ids[-1])][0] == 16
    assert compact_thread(scratch_db, "js-delta", snapshot_frequency=4).status == "already_delta"
    _assert_rewrites_keep_every_reading(scratch_db, "js-delta")
    report = convert_thread(scratch_db, "js-delta")
    assert report.status == "converted"
    assert not any(DELTA_WRITES_VERSIONED_METADATA_KEY in t.metadata for t in stored_tuples(scratch_db, "js-delta"))
