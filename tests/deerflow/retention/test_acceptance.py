"""Acceptance on the real fixture, both backends: keep_last 5 and safe_only on every thread leave every kept
checkpoint reading through LangGraph's reader exactly as before (the manifest's digests of messages and of
every channel), the heads unchanged, and a revert restores every thread.

Where the replay rule and LangGraph's reader disagree (an input checkpoint forked from a checkpoint holding
another turn's writes, DeerFlow #4458: :func:`tests.dashboard.oracle.fork_input_checkpoints`), keep_last keeps
the chain that reading goes through (protected ``reader_disagreement``) instead of rebasing it."""

from __future__ import annotations

import pytest

from deerflow.retention import keep_last, revert_prune, safe_only
from tests.dashboard.oracle import fork_input_checkpoints
from tests.deerflow.convert.support import raw_rows
from tests.deerflow.retention.support import all_keys, read


@pytest.mark.slow
def test_keep_last_5_on_every_thread_reads_with_the_manifest_digests(fixture_db, manifest):
    db, backend = fixture_db, fixture_db.backend
    failures, kept_total, deleted_total, rebased_total, switched = [], 0, 0, 0, 0
    backups = {}
    for thread in manifest["threads"]:
        thread_id = thread["thread_id"]
        facts = thread["backends"][backend]
        expected = {(c["checkpoint_ns"], c["checkpoint_id"]): (c["message_count"], c["messages_sha256"],
                                                               c["channels_sha256"]) for c in facts["checkpoints"]}
        original = raw_rows(db, thread_id)
        differ = fork_input_checkpoints(facts["checkpoints"])
        report = keep_last(db, thread_id, 5)
        assert report.status in ("pruned", "nothing_to_prune"), (thread_id, report.error, report.first_difference)
        kept = all_keys(db, thread_id)
        assert {cid for _ns, cid in kept} == set(report.kept_checkpoint_ids), thread_id
        assert facts["head_checkpoint_id"] in report.kept_checkpoint_ids
        disagreeing = {(p["checkpoint_ns"], p["checkpoint_id"]) for p in report.protected
                       if p["reason"] == "reader_disagreement"}
        assert not differ & {(ns, cid) for ns, cid in kept if cid in report.rebased_checkpoint_ids}, thread_id
        switched += len(disagreeing)
        got = read(db, thread_id, kept)
        bad = [(k, got[k], expected[k]) for k in sorted(kept) if got[k] != expected[k]]
        if bad:
            failures.append(f"{thread_id}: {bad[:2]}")
        kept_total += len(kept)
        deleted_total += len(report.deleted_checkpoint_ids)
        rebased_total += len(report.rebased_checkpoint_ids)
        if report.backup_id:
            backups[thread_id] = (report.backup_id, original)
    assert failures == []
    assert deleted_total > 2000 and rebased_total > 10
    assert switched >= 1  # delta-f10-fork-from-input: the chain its kept fork checkpoint reads through is kept
    print(f"\n[{backend}] kept {kept_total}, deleted {deleted_total}, rebased {rebased_total}, "
          f"kept for a reader disagreement {switched}")
    for thread_id, (backup_id, original) in backups.items():
        assert revert_prune(db, backup_id).status == "reverted"
        assert raw_rows(db, thread_id) == original, thread_id


@pytest.mark.slow
def test_safe_only_on_every_thread_deletes_only_the_fork_leaves(fixture_db, manifest):
    db, backend = fixture_db, fixture_db.backend
    pruned = {}
    for thread in manifest["threads"]:
        thread_id = thread["thread_id"]
        checkpoints = thread["backends"][backend]["checkpoints"]
        report = safe_only(db, thread_id)
        assert report.status in ("pruned", "nothing_to_prune"), (thread_id, report.error)
        if report.status == "pruned":
            pruned[thread_id] = len(report.deleted_checkpoint_ids)
            kept = all_keys(db, thread_id)
            expected = {(c["checkpoint_ns"], c["checkpoint_id"]): (c["message_count"], c["messages_sha256"],
                                                                   c["channels_sha256"]) for c in checkpoints}
            assert read(db, thread_id, kept) == {k: expected[k] for k in kept}, thread_id
            parents = {c["checkpoint_id"]: c["parent_checkpoint_id"] for c in checkpoints}
            ids = {cid for _ns, cid in kept}
            assert all(parents[cid] is None or parents[cid] in ids for cid in ids), thread_id
    assert set(pruned) == {"delta-f10-fork", "delta-f10-fork-from-input", "full-rollback"}, pruned
