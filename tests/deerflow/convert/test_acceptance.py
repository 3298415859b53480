"""Acceptance on the real fixture, both backends: convert every thread, read every checkpoint with a
full-mode accessor against the manifest (LangGraph's reading before the conversion, messages and every
channel), then revert every backup byte-identically.

Where the replay rule departs from LangGraph's reader (the input child of a fork and its descendants,
:func:`tests.dashboard.oracle.fork_input_checkpoints`), the converted value is LangGraph's reading, so a
full-mode DeerFlow serves what the delta-mode one did."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from deerflow.convert import convert_thread, revert_thread
from deerflow.convert.digest import channels_sha256, messages_sha256
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, COUNTERS_METADATA_KEY
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.dashboard.oracle import fork_input_checkpoints
from tests.deerflow.convert.support import config_for, execute, open_saver, raw_rows
from tests.deerflow.convert.test_dry_run import expected_rewrites

# The integrity check reads each checkpoint through LangGraph once: ~1 min per backend on this
# 1,200-checkpoint thread. It runs on every other thread here and on hand-built ones (test_integrity.py).
WITHOUT_INTEGRITY = {"delta-f100-150t"}


def _is_full(thread: dict[str, Any]) -> bool:
    return thread["category"] in ("full", "empty") or thread["write_mode"] == "full"


def _metadata(db, thread_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    column = "metadata" if db.backend == "sqlite" else "metadata::text"
    rows = execute(db, f"SELECT checkpoint_ns, checkpoint_id, {column} FROM checkpoints WHERE thread_id = ?",
                   (thread_id,))
    return {(ns, cid): json.loads(m) for ns, cid, m in rows}


def _without_delta_keys(metadata: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in metadata.items() if k != CHECKPOINT_MODE_METADATA_KEY}
    counters = {k: v for k, v in (out.pop(COUNTERS_METADATA_KEY, None) or {}).items() if k != "messages"}
    if counters:
        out[COUNTERS_METADATA_KEY] = counters
    return out


def _fork_input_keys(manifest: dict[str, Any], backend: str) -> set[tuple[str, str, str]]:
    """``{(thread, ns, id)}`` where the replay rule departs from LangGraph's reader (the manifest's reading)."""
    return {(t["thread_id"], ns, cid) for t in manifest["threads"]
            for ns, cid in fork_input_checkpoints(t["backends"][backend]["checkpoints"])}


def _full_mode_sweep(db, manifest: dict[str, Any]) -> tuple[int, list[str]]:
    """Every checkpoint of every thread through a full-mode accessor, against the manifest (LangGraph's reading
    before the conversion, digests of messages and of every channel)."""
    backend = db.backend
    failures: list[str] = []
    readings = 0
    with open_saver(db) as saver:
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        for thread in manifest["threads"]:
            thread_id = thread["thread_id"]
            checkpoints = thread["backends"][backend]["checkpoints"]
            for ns in dict.fromkeys(c["checkpoint_ns"] for c in checkpoints):
                expected = [(c["checkpoint_id"], c["message_count"], c["messages_sha256"], c["channels_sha256"])
                            for c in checkpoints if c["checkpoint_ns"] == ns]
                got = []
                for snapshot in full.iter_history(config_for(thread_id, ns=ns)):  # raises on any delta evidence
                    messages = snapshot.values.get("messages") or []
                    got.append((snapshot.config["configurable"]["checkpoint_id"], len(messages),
                                messages_sha256(messages), channels_sha256(snapshot.values)))
                    readings += 1
                if got != expected:
                    bad = [(g, e) for g, e in zip(got, expected, strict=False) if g != e][:3]
                    failures.append(f"{backend} {thread_id} ns={ns!r}: {len(got)} readings, first differences {bad}")
    return readings, failures


@pytest.mark.slow
def test_convert_every_thread_read_in_full_mode_then_revert(fixture_db, manifest):
    db, backend = fixture_db, fixture_db.backend
    threads = manifest["threads"]
    original = {t["thread_id"]: raw_rows(db, t["thread_id"]) for t in threads}
    metadata_before = {t["thread_id"]: _metadata(db, t["thread_id"]) for t in threads}
    timings: dict[str, float] = {}
    assert len(_fork_input_keys(manifest, backend)) == 5  # delta-f10-fork-from-input: its input checkpoint and 4 below

    reports = {}
    for thread in threads:
        thread_id = thread["thread_id"]
        facts = thread["backends"][backend]
        started = time.monotonic()
        report = convert_thread(db, thread_id, integrity=thread_id not in WITHOUT_INTEGRITY)
        timings[f"convert {thread_id}"] = time.monotonic() - started
        where = f"{backend} {thread_id}: {report.status} {report.error}"
        assert report.checkpoints_total == facts["checkpoint_count"], where
        assert report.checkpoints_to_rewrite == expected_rewrites(facts["checkpoints"]), where
        assert report.head_messages_sha256 == facts["head"]["messages_sha256"], where
        assert not [f for f in report.findings if f["blocking"]], where
        if _is_full(thread):
            assert report.status == "already_full" and report.backup_id is None, where
            assert raw_rows(db, thread_id) == original[thread_id], where
        else:
            assert report.status == "converted" and report.backup_id and report.attempts == 1, where
            assert report.bytes_after > report.bytes_before, where
            reports[thread_id] = report
            # only the DeerFlow marker and LangGraph's messages counter left the metadata
            after = _metadata(db, thread_id)
            assert after == {k: _without_delta_keys(v) for k, v in metadata_before[thread_id].items()}, where
    assert len(reports) == sum(1 for t in threads if not _is_full(t)) == 19

    started = time.monotonic()
    readings, failures = _full_mode_sweep(db, manifest)
    timings["full-mode read of every checkpoint"] = time.monotonic() - started
    assert failures == [], "\n".join(failures)
    assert readings == sum(len(t["backends"][backend]["checkpoints"]) for t in threads) == 3268
    if backend == "postgres":
        # no inline snapshot marker is left in any checkpoint document
        assert execute(db, "SELECT count(*) FROM checkpoints "
                           "WHERE checkpoint -> 'channel_values' -> 'messages' IS NOT NULL")[0][0] == 0

    for thread_id, report in reports.items():
        started = time.monotonic()
        reverted = revert_thread(db, report.backup_id)
        timings[f"revert {thread_id}"] = time.monotonic() - started
        assert reverted.status == "reverted", (thread_id, reverted.error)
        assert raw_rows(db, thread_id) == original[thread_id], f"{backend} {thread_id}: revert is not byte-identical"

    print(f"\n[{backend}] " + ", ".join(f"{k}: {v:.1f}s" for k, v in timings.items()
                                        if v > 1 or "f100" in k or "200t" in k or "full-mode" in k))
