"""DeerFlow's retention contract on memory, SQLite and Postgres: what each rule must keep, may delete, and how
the thread reads afterwards (through LangGraph's reader, and by a real graph's next turn)."""

from __future__ import annotations

import pytest

from deerflow.retention import keep_last, safe_only
from tests.deerflow.retention.support import (
    all_keys,
    branched,
    duration_stamp,
    head_messages,
    ids,
    new_turn,
    parent_of,
    pending_write,
    pending_writes_of,
    read,
    turns,
)


def _parents(target, thread_id):
    return {cid: parent_of(target, thread_id, cid) for cid in ids(target, thread_id)}


def test_safe_only_never_deletes_a_branch_ancestor(target):
    main, branch = branched(target, "t")
    parents = _parents(target, "t")
    protect = [branch[-1]]  # a resume target at the branch's tip: its whole line is a branch ancestor
    before = read(target, "t")
    report = safe_only(target, "t", protect=protect)
    assert report.status == "nothing_to_prune", report.error
    kept = set(ids(target, "t"))
    for cid in kept:
        assert parents[cid] is None or parents[cid] in kept
    assert read(target, "t") == before


def test_a_protected_resume_target_stays_readable_and_resumable(target):
    turns(target, "t", 6)
    old = ids(target, "t")
    target_id = old[len(old) // 3]
    before = read(target, "t", [("", target_id)])
    report = keep_last(target, "t", 2, protect=[target_id])
    assert report.status == "pruned", report.error
    assert target_id in report.kept_checkpoint_ids and target_id in report.rebased_checkpoint_ids
    assert {"checkpoint_ns": "", "checkpoint_id": target_id, "reason": "resume_target"} in report.protected
    assert parent_of(target, "t", target_id) is None
    assert read(target, "t", [("", target_id)]) == before
    # resuming from it (a branch off the target) reads its value plus the new turn
    value = before[("", target_id)][0]
    turns(target, "t", 1, start=70, from_checkpoint=target_id)
    assert len(head_messages(target, "t")) >= value + 2
    assert [m.id for m in head_messages(target, "t")][value] == "h-70"


def test_pending_writes_are_kept(target):
    main, branch = branched(target, "t")
    pending_write(target, "t", branch[-1])
    report = keep_last(target, "t", 2)
    assert report.status == "pruned", report.error
    assert {"checkpoint_ns": "", "checkpoint_id": branch[-1], "reason": "pending_writes"} in report.protected
    writes = pending_writes_of(target, "t", branch[-1])
    assert [(w[0], w[1]) for w in writes] == [("task-interrupted", "messages")]
    assert [m.id for m in writes[0][2]] == ["ai-x"]
    report = safe_only(target, "t")
    assert branch[-1] not in report.deleted_checkpoint_ids


def test_a_trailing_duration_only_leaf_is_deletable(target):
    turns(target, "t", 3)
    head = ids(target, "t")[-1]
    before = read(target, "t")
    stamp = duration_stamp(target, "t")
    report = safe_only(target, "t")
    assert report.status == "pruned", report.error
    assert report.deleted_checkpoint_ids == [stamp]
    assert ids(target, "t")[-1] == head
    assert read(target, "t") == before
    prior = head_messages(target, "t")
    messages = new_turn(target, "t", 9)
    assert messages[:len(prior)] == prior and messages[len(prior)].id == "h-9"
    assert messages[-1].type == "ai" and len(messages) > len(prior) + 1


def test_a_leaf_sibling_branch_is_deletable(target):
    main, branch = branched(target, "t")
    keep = all_keys(target, "t") - {("", b) for b in branch}
    before = read(target, "t", keep)
    report = safe_only(target, "t")
    assert report.status == "pruned", report.error
    assert report.deleted_checkpoint_ids == sorted(branch)
    assert all_keys(target, "t") == keep
    assert read(target, "t") == before


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_keep_last_reads_as_before_and_the_head_takes_a_new_turn(target, mode):
    for thread_id in ("pruned", "control"):
        main, branch = branched(target, thread_id, mode=mode)
    before = read(target, "pruned")
    report = keep_last(target, "pruned", 4)
    assert report.status == "pruned", report.error
    kept = ids(target, "pruned")
    assert len(kept) == 4 and set(kept) == set(report.kept_checkpoint_ids)
    assert report.deleted_checkpoint_ids and not set(report.deleted_checkpoint_ids) & set(kept)
    assert read(target, "pruned") == {k: v for k, v in before.items() if k in {("", c) for c in kept}}
    oldest = kept[0]
    assert parent_of(target, "pruned", oldest) is None
    assert report.rebased_checkpoint_ids == ([] if mode == "full" else [oldest])
    assert report.bytes_after < report.bytes_before
    # the head accepts a new turn that reads exactly as the same turn on an unpruned copy
    assert new_turn(target, "pruned", 99, mode=mode) == new_turn(target, "control", 99, mode=mode)
    assert read(target, "pruned", [("", ids(target, "pruned")[-1])]).popitem()[1] == \
        read(target, "control", [("", ids(target, "control")[-1])]).popitem()[1]


def test_keep_last_dry_run_writes_nothing_and_lists_the_plan(target):
    main, branch = branched(target, "t")
    before = read(target, "t")
    report = keep_last(target, "t", 3, dry_run=True)
    assert report.status == "would_prune"
    assert read(target, "t") == before
    assert len(report.kept_checkpoint_ids) == 3 and set(branch) <= set(report.deleted_checkpoint_ids)
    assert report.unbranchable_checkpoint_ids and set(report.unbranchable_checkpoint_ids).isdisjoint(branch)
    assert 0 < report.bytes_after < report.bytes_before


def test_bad_input_is_a_clear_error(target):
    with pytest.raises(ValueError, match="n >= 1"):
        keep_last(target, "t", 0)
    turns(target, "t", 1)
    report = keep_last(target, "nope", 3)
    assert report.status == "not_found" and "'nope'" in report.error


def test_a_missing_sqlite_file_is_a_clear_error(tmp_path):
    from deerflow.config.database_config import DatabaseConfig

    report = keep_last(DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "none")), "t", 3)
    assert report.status == "not_found" and "does not exist" in report.error and report.hint
