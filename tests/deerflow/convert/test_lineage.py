"""Lineage: the walk follows ``parent_checkpoint_id`` only, and broken lineage fails closed.

Forks (from an end-of-turn checkpoint and from an input checkpoint) convert to
exactly what LangGraph's delta reader showed on both branches, with a
``branch_point`` finding; ``step`` and ``ts`` (which restart or lie) play no
part. A dangling parent, a parent cycle and a NULL parent mid-thread block the
thread with a finding, and nothing is written.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from deerflow.convert import convert_thread, dry_run_thread
from tests.deerflow.convert.support import (
    agent_graph,
    all_rows,
    backup_ids,
    checkpoint_ids,
    config_for,
    convert_and_compare,
    execute,
    findings_of,
    human,
    ids_of,
    messages_at,
    open_saver,
    raw_rows,
    readings,
    run_turn,
    stored_tuples,
)

THREAD = "lineage"


def _head_id(saver: Any, thread_id: str = THREAD) -> str:
    return saver.get_tuple(config_for(thread_id)).config["configurable"]["checkpoint_id"]


def _turns(db: Any, n: int, *, tool_every: int = 2) -> list[str]:
    """``n`` turns on a fresh thread; returns the head checkpoint id after each turn."""
    heads = []
    with open_saver(db) as saver:
        graph = agent_graph(saver, tool_every=tool_every)
        for t in range(n):
            run_turn(graph, THREAD, human(t))
            heads.append(_head_id(saver))
    return heads


def test_fork_from_end_of_turn_checkpoint(scratch_db):
    heads = _turns(scratch_db, 4)
    fork_at = heads[1]
    at_fork = ids_of(messages_at(scratch_db, THREAD, fork_at, mode="delta"))
    abandoned_head = heads[3]
    abandoned = ids_of(messages_at(scratch_db, THREAD, abandoned_head, mode="delta"))
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, tool_every=2)
        run_turn(graph, THREAD, human(10), checkpoint_id=fork_at)
        run_turn(graph, THREAD, human(11))
    # the step counter restarts on the branch: steps repeat across the two branches
    steps = Counter(t.metadata["step"] for t in stored_tuples(scratch_db, THREAD))
    assert max(steps.values()) >= 2

    report = convert_and_compare(scratch_db, THREAD)

    assert [f["checkpoint_id"] for f in findings_of(report, "branch_point")] == [fork_at]
    assert all(not f["blocking"] for f in report.findings)
    branch_head = ids_of(messages_at(scratch_db, THREAD, mode="full"))
    assert branch_head[: len(at_fork)] == at_fork
    assert [i for i in branch_head[len(at_fork):] if i.startswith("h-")] == ["h-10", "h-11"]
    assert "h-2" not in branch_head and "h-3" not in branch_head
    assert ids_of(messages_at(scratch_db, THREAD, abandoned_head, mode="full")) == abandoned


def test_fork_from_input_checkpoint(scratch_db):
    heads = _turns(scratch_db, 4, tool_every=0)
    tuples = stored_tuples(scratch_db, THREAD)
    parent_of = {t.config["configurable"]["checkpoint_id"]: (t.parent_config or {}).get("configurable", {})
                 .get("checkpoint_id") for t in tuples}
    # the input checkpoint of turn index 2 is the 'input' child of turn 1's head
    input_cp = next(t.config["configurable"]["checkpoint_id"] for t in tuples
                    if t.metadata["source"] == "input"
                    and parent_of[t.config["configurable"]["checkpoint_id"]] == heads[1])
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver)
        run_turn(graph, THREAD, human(20), checkpoint_id=input_cp)
        run_turn(graph, THREAD, human(21))

    report = convert_and_compare(scratch_db, THREAD)

    assert input_cp in [f["checkpoint_id"] for f in findings_of(report, "branch_point")]
    head = ids_of(messages_at(scratch_db, THREAD, mode="full"))
    assert "h-20" in head and "h-21" in head and "h-3" not in head


def test_step_and_time_are_never_used(scratch_db):
    """Scrambling every checkpoint's ``step`` and ``ts`` changes nothing: only parent links count."""
    _turns(scratch_db, 5)
    truth = readings(scratch_db, THREAD, "delta")
    with open_saver(scratch_db) as saver:
        tuples = list(saver.list(config_for(THREAD)))
        for i, tup in enumerate(tuples):
            checkpoint = {**tup.checkpoint, "ts": f"2001-01-{(i % 27) + 1:02d}T00:00:00+00:00"}
            metadata = {**tup.metadata, "step": 1000 - 7 * i if i % 2 else i % 3}
            parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
            saver.put(config_for(THREAD, parent), checkpoint, metadata, {})
    assert readings(scratch_db, THREAD, "delta") == truth

    convert_and_compare(scratch_db, THREAD)

    assert readings(scratch_db, THREAD, "full") == truth


def _assert_blocked_and_untouched(db: Any, kind: str, expected_ids: list[str]) -> Any:
    before = all_rows(db)
    dry = dry_run_thread(db, THREAD)
    assert dry.status == "blocked"
    report = convert_thread(db, THREAD)
    assert report.status == "blocked", report
    found = findings_of(report, kind)
    assert sorted(f["checkpoint_id"] for f in found) == sorted(expected_ids)
    assert all(f["blocking"] and f["checkpoint_ns"] == "" for f in found)
    assert kind in report.error or found[0]["detail"] in report.error
    assert report.hint
    assert report.backup_id is None and report.checkpoints_to_rewrite >= 0
    # never "[]" as if complete: the head's value is unknown, not the empty list's digest
    assert report.head_messages_sha256 is None
    assert all_rows(db) == before
    assert backup_ids(db) == []
    return report


def test_dangling_parent_blocks(scratch_db):
    _turns(scratch_db, 3)
    ids = checkpoint_ids(scratch_db, THREAD)
    victim = ids[3]
    child = next(t.config["configurable"]["checkpoint_id"] for t in stored_tuples(scratch_db, THREAD)
                 if t.parent_config and t.parent_config["configurable"]["checkpoint_id"] == victim)
    execute(scratch_db, "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?", (THREAD, victim))
    report = _assert_blocked_and_untouched(scratch_db, "dangling_parent", [
        cid for cid in checkpoint_ids(scratch_db, THREAD) if cid > victim])
    assert any(f["checkpoint_id"] == child and victim in f["detail"] for f in report.findings)


def test_parent_cycle_blocks(scratch_db):
    _turns(scratch_db, 2)
    ids = checkpoint_ids(scratch_db, THREAD)
    # ids[1]'s parent becomes the newest checkpoint: ids[1] .. ids[-1] form a cycle
    execute(scratch_db, "UPDATE checkpoints SET parent_checkpoint_id = ? WHERE thread_id = ? AND checkpoint_id = ?",
            (ids[-1], THREAD, ids[1]))
    report = _assert_blocked_and_untouched(scratch_db, "cycle", ids[1:])
    assert report.checkpoints_total == len(ids)


def test_null_parent_mid_thread_blocks(scratch_db):
    _turns(scratch_db, 3)
    ids = checkpoint_ids(scratch_db, THREAD)
    execute(scratch_db, "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? AND checkpoint_id = ?",
            (THREAD, ids[4]))
    report = _assert_blocked_and_untouched(scratch_db, "null_parent", [ids[4]])
    assert not findings_of(report, "dangling_parent")


def test_lineage_breaks_are_reported_per_namespace_and_thread(scratch_db):
    """A broken thread does not affect another thread in the same database."""
    _turns(scratch_db, 2)
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver)
        run_turn(graph, "healthy", human(0))
    ids = checkpoint_ids(scratch_db, THREAD)
    execute(scratch_db, "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?", (THREAD, ids[0]))
    assert convert_thread(scratch_db, THREAD).status == "blocked"
    healthy_before = raw_rows(scratch_db, "healthy")
    assert convert_and_compare(scratch_db, "healthy").status == "converted"
    assert raw_rows(scratch_db, "healthy") != healthy_before
