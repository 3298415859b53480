"""Acceptance (issue 12) on the real fixture, both backends: keep_last 5 on every thread leaves every kept
checkpoint reading with the manifest's digests, the heads unchanged, and a revert restores every thread.

Where the replay rule and LangGraph's reader disagree (an input checkpoint forked from a checkpoint holding
another turn's writes, DeerFlow #4458: :func:`tests.dashboard.oracle.fork_input_checkpoints`), a rebase on
the chain stores the replay rule's value, so LangGraph's reader then reads it: the manifest's reading less
the messages written under the fork point (computed here from LangGraph's reading and the saver's writes)."""

from __future__ import annotations

from typing import Any

import pytest

from deerflow.convert.digest import messages_sha256
from deerflow.retention import keep_last, revert_prune, safe_only
from deerflow.retention.reading import langgraph_reader
from tests.dashboard.oracle import fork_input_checkpoints
from tests.deerflow.convert.support import config_for, open_saver, raw_rows
from tests.deerflow.retention.support import all_keys, read


def _replay_readings(db: Any, thread_id: str, cps: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    """``{(ns, id): (fork point's key, (count, messages_sha256))}`` of the replay rule's reading per
    fork_input checkpoint.

    The fork point is the parent of the topmost ``input`` checkpoint of the branch; the replay rule's value
    is LangGraph's reading without the ``messages`` written under the fork point (the fork never ran them).
    """
    differ = fork_input_checkpoints(cps)
    parents = {(c["checkpoint_ns"], c["checkpoint_id"]): c["parent_checkpoint_id"] for c in cps}
    out = {}
    with open_saver(db) as saver:
        reader = langgraph_reader(saver)
        for ns, cid in differ:
            path, key = [], (ns, cid)
            while key in differ:
                path.append(key)
                key = (ns, parents[key])
            writes = saver.get_tuple(config_for(thread_id, key[1], ns)).pending_writes or []
            dropped = {m.id for _task, channel, value in writes if channel == "messages"
                       for m in (value if isinstance(value, list) else [value])}
            assert dropped, (thread_id, key)
            messages = [m for m in reader.get(config_for(thread_id, cid, ns)).values.get("messages") or []
                        if m.id not in dropped]
            out[(ns, cid)] = (set(path), (len(messages), messages_sha256(messages)))
    return out


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
        replayed = _replay_readings(db, thread_id, facts["checkpoints"])
        report = keep_last(db, thread_id, 5)
        assert report.status in ("pruned", "nothing_to_prune"), (thread_id, report.error, report.first_difference)
        kept = all_keys(db, thread_id)
        assert {cid for _ns, cid in kept} == set(report.kept_checkpoint_ids), thread_id
        assert facts["head_checkpoint_id"] in report.kept_checkpoint_ids
        for k, (path, (count, sha)) in replayed.items():
            if k in kept and any(cid in report.rebased_checkpoint_ids for _ns, cid in path):
                expected[k] = (count, sha, expected[k][2])
                switched += 1
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
    assert switched >= 1  # delta-f10-fork-from-input: the kept fork checkpoint now reads the replay value
    print(f"\n[{backend}] kept {kept_total}, deleted {deleted_total}, rebased {rebased_total}, "
          f"now read by the replay rule {switched}")
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
