"""SIGKILL in the middle of a batch prune (:mod:`deerflow.retention.setbatch`): every thread of a batch is
untouched, or every one is completely pruned; never one without the others, never a partial thread.

A child process runs ``prune_threads(keep_last 5)`` with backups on the real fixture's full-mode threads
(Postgres), which the batch path prunes in two transactions at once (``setbatch.batches_of``; none goes
alone, checked by an unkilled calibration run in this process), and is killed with ``kill -9`` at a seeded
random delay drawn uniformly from 0 to 1.1 times the calibration's prune time (a child that finished first
is not a kill; the draw is repeated): 50 kills. After each kill every thread's rows equal the original byte
for byte with no backup (*untouched*), or hold exactly the calibration's kept checkpoints, each reading with
the manifest's digests, with exactly one active backup that reverts it byte for byte (*pruned*). A batch
with threads of both outcomes, or anything else, fails; the two batches may differ. A thread outside the
batches is never touched.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

import deerflow.retention.batch as batch_module
from deerflow.convert import list_backups
from deerflow.retention import prune_threads, revert_prune
from deerflow.retention.setbatch import batches_of
from tests.deerflow.convert.support import backup_ids, execute, raw_rows, settle
from tests.deerflow.retention.support import all_keys, read
from tests.manage_forks import ForkedScript

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SEED = int(os.environ.get("DFA_CRASH_SEED", "20251205"))
KILLS = int(os.environ.get("DFA_BATCH_KILLS", "50"))
NEIGHBOUR = "delta-f10-50t"
CHILD = r"""
import json, sys, time
from deerflow.config.database_config import DatabaseConfig
from deerflow.retention import prune_threads

database = DatabaseConfig(**json.loads(sys.argv[1]))
threads = json.loads(sys.argv[2])
print("ready", flush=True)
started = time.monotonic()
reports = prune_threads(database, threads, "keep_last", n=5)
print("done", round(time.monotonic() - started, 3), " ".join(r.status for r in reports), flush=True)
"""


def _run(db, threads: list[str], delay: float) -> str:
    """Run the child and kill it ``delay`` s after it is ready; ``"killed"`` or ``"exited"``."""
    proc = ForkedScript(CHILD, [db.model_dump_json(), json.dumps(threads)], ROOT)
    try:
        if proc.stdout.readline().strip() != "ready":
            proc.wait(timeout=30)
            pytest.fail(f"prune child did not start: {proc.stderr_path.read_text()}")
        if not proc.kill_after(delay):
            return "exited"
        for t in threads:
            settle(db, t)  # the killed child's server backend may still be committing
        return "killed"
    finally:
        proc.close()


def _outcome(db, thread_id: str, original, kept_ids: set[str], digests) -> str:
    if raw_rows(db, thread_id) == original:
        assert [b for b in list_backups(db, thread_id) if b.status == "active"] == [], thread_id
        return "untouched"
    kept = all_keys(db, thread_id)
    assert {cid for _ns, cid in kept} == kept_ids, f"partial: {thread_id}'s kept set differs"
    got = read(db, thread_id, kept)
    assert all(got[k] == digests[k] for k in kept), f"partial: a kept checkpoint of {thread_id} reads differently"
    active = [b for b in list_backups(db, thread_id) if b.status == "active"]
    assert len(active) == 1, f"partial: {thread_id} has no single active backup"
    assert revert_prune(db, active[0].backup_id).status == "reverted"
    assert raw_rows(db, thread_id) == original, f"{thread_id}: the revert is not byte-identical"
    execute(db, "DELETE FROM dfa_backups WHERE backup_id = ?", (active[0].backup_id,))
    return "pruned"


def test_sigkill_during_a_batch_prune_leaves_all_its_threads_untouched_or_all_pruned(
        postgres_fixture_db_rw, manifest, monkeypatch):
    db = postgres_fixture_db_rw
    threads = sorted(t["thread_id"] for t in manifest["threads"] if t["thread_id"].startswith("full-")
                     and len(t["backends"]["postgres"]["checkpoints"]) > 5)
    digests = {t["thread_id"]: {(c["checkpoint_ns"], c["checkpoint_id"]): (
        c["message_count"], c["messages_sha256"], c["channels_sha256"])
        for c in t["backends"]["postgres"]["checkpoints"]} for t in manifest["threads"]}
    original = {t: raw_rows(db, t) for t in threads}
    neighbour = raw_rows(db, NEIGHBOUR)
    # calibration, in this process: the batch path prunes every one of them (none goes alone)
    alone: list[str] = []
    real = batch_module.prune_thread
    monkeypatch.setattr(batch_module, "prune_thread", lambda target, t, *a, **k: alone.append(t) or real(target, t,
                                                                                                         *a, **k))
    reports = prune_threads(db, threads, "keep_last", n=5)
    monkeypatch.undo()
    assert alone == [] and {r.status for r in reports} == {"pruned"}, (alone, [r.status for r in reports])
    expected = {r.thread_id: set(r.kept_checkpoint_ids) for r in reports}
    assert {_outcome(db, t, original[t], expected[t], digests[t]) for t in threads} == {"pruned"}
    duration = _calibrated(db, threads, original, expected, digests)
    chunks = batches_of(threads)
    assert len(chunks) == 2, chunks  # two transactions at once: each is all or nothing
    rng = random.Random(SEED)
    outcomes = {"untouched": 0, "pruned": 0}
    kills = 0
    while kills < KILLS:
        last = _run(db, threads, rng.uniform(0, duration * 1.1))
        batches = [{_outcome(db, t, original[t], expected[t], digests[t]) for t in batch} for batch in chunks]
        assert all(len(batch) == 1 for batch in batches), f"a batch was split: {batches}"
        if last == "killed":
            kills += 1
            for batch in batches:
                outcomes[batch.pop()] += 1
    assert raw_rows(db, NEIGHBOUR) == neighbour
    assert backup_ids(db) == []
    print(f"\n[postgres] seed={SEED} batch prune of {len(threads)} threads {duration:.2f}s: {kills} kills -> "
          f"{outcomes} (batches), split 0, partial 0")


def _calibrated(db, threads, original, expected, digests) -> float:
    """An unkilled child's prune time (s); its prune is checked and reverted."""
    proc = ForkedScript(CHILD, [db.model_dump_json(), json.dumps(threads)], ROOT)
    try:
        assert proc.stdout.readline().strip() == "ready"
        words = proc.stdout.read().split()
        proc.wait(timeout=120)
    finally:
        proc.close()
    assert words[0] == "done" and set(words[2:]) == {"pruned"}, words
    assert {_outcome(db, t, original[t], expected[t], digests[t]) for t in threads} == {"pruned"}
    return float(words[1])
