"""Acceptance (issue 11) on the real fixture, both backends: compact every full and migrated thread, read every
checkpoint of every thread through the accessor in delta mode and through a plain LangGraph ``DeltaChannel``
graph against the manifest, then revert every compaction byte for byte."""

from __future__ import annotations

import time
from typing import Any

import pytest

from deerflow.convert import revert_thread
from deerflow.convert.compactor import compact_thread, dry_run_compact
from deerflow.convert.digest import channels_sha256, messages_sha256
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.compact_support import plain_delta_graph, replay_depths
from tests.deerflow.convert.support import config_for, open_saver, raw_rows

K = 10


def _compactable(thread: dict[str, Any]) -> bool:
    return thread["category"] in ("full", "migrated", "untrusted") and thread["write_mode"] != "delta"


def _sweep(db, manifest: dict[str, Any], thread_ids: set[str]) -> tuple[int, list[str]]:
    """Every checkpoint of the threads: delta-mode accessor history and a plain DeltaChannel graph's get_state."""
    failures, readings = [], 0
    with open_saver(db) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
        plain = plain_delta_graph(saver)
        for thread in manifest["threads"]:
            if thread["thread_id"] not in thread_ids:
                continue
            tid = thread["thread_id"]
            checkpoints = thread["backends"][db.backend]["checkpoints"]
            for ns in dict.fromkeys(c["checkpoint_ns"] for c in checkpoints):
                # LangGraph's reading before the compaction: the digests of messages and of every channel
                want = [(c["checkpoint_id"], c["messages_sha256"], c["channels_sha256"])
                        for c in checkpoints if c["checkpoint_ns"] == ns]
                got = [(s.config["configurable"]["checkpoint_id"], messages_sha256(s.values.get("messages") or []),
                        channels_sha256(s.values)) for s in accessor.iter_history(config_for(tid, ns=ns))]
                readings += len(got)
                if got != want:
                    failures.append(f"accessor {tid} ns={ns!r}: "
                                    f"{[g for g, w in zip(got, want, strict=False) if g != w][:2]}")
                for cid, digest, _channels in want:
                    state = plain.get_state(config_for(tid, cid, ns))
                    if messages_sha256(state.values.get("messages") or []) != digest:
                        failures.append(f"plain DeltaChannel graph {tid} {ns!r} {cid}")
    return readings, failures


@pytest.mark.slow
def test_compact_every_full_and_migrated_thread_read_in_delta_mode_then_revert(fixture_db, manifest):
    db = fixture_db
    threads = manifest["threads"]
    original = {t["thread_id"]: raw_rows(db, t["thread_id"]) for t in threads}
    compacted = {}
    timings = {}
    for thread in threads:
        tid = thread["thread_id"]
        facts = thread["backends"][db.backend]
        started = time.monotonic()
        preview = dry_run_compact(db, tid, snapshot_frequency=K)
        timings[f"dry run {tid}"] = time.monotonic() - started
        started = time.monotonic()
        report = compact_thread(db, tid, snapshot_frequency=K)
        timings[f"compact {tid}"] = time.monotonic() - started
        where = f"{db.backend} {tid}: {report.status} {report.error} {report.first_difference}"
        assert report.checkpoints_total == facts["checkpoint_count"], where
        assert report.head_messages_sha256 == facts["head"]["messages_sha256"], where
        if _compactable(thread):
            assert report.status == "compacted" and report.backup_id and report.attempts == 1, where
            assert preview.status == "needs_compaction", where
            assert preview.snapshot_positions == report.snapshot_positions, where
            assert report.bytes_after < report.bytes_before, where
            assert abs(preview.bytes_after - report.bytes_after) <= 0.02 * report.bytes_before, (
                where, preview.bytes_after, report.bytes_after)
            assert max(replay_depths(db, tid)) <= K, where
            compacted[tid] = report
        else:
            assert report.status == preview.status == "already_delta", where
            assert raw_rows(db, tid) == original[tid], where
    assert sorted(compacted) == sorted(t["thread_id"] for t in threads if _compactable(t))
    assert "migrated-full20-delta20" in compacted and len(compacted) == 7

    # the untouched threads are byte-identical (above); every checkpoint of the compacted ones reads as before
    started = time.monotonic()
    readings, failures = _sweep(db, manifest, set(compacted))
    timings["delta-mode reads"] = time.monotonic() - started
    assert failures == [], "\n".join(failures)
    assert readings == sum(len(t["backends"][db.backend]["checkpoints"])
                           for t in threads if t["thread_id"] in compacted)

    # a second compaction has nothing to do
    assert compact_thread(db, "full-tools-30t", snapshot_frequency=K).status == "already_delta"

    for tid, report in compacted.items():
        reverted = revert_thread(db, report.backup_id)
        assert reverted.status == "reverted", (tid, reverted.error)
        assert raw_rows(db, tid) == original[tid], f"{db.backend} {tid}: revert is not byte-identical"
    print(f"\n[{db.backend}] " + ", ".join(f"{k}: {v:.1f}s" for k, v in timings.items() if v > 0.5))
