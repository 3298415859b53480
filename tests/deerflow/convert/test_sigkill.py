"""SIGKILL in the middle of a conversion: the thread is either untouched or fully converted, never partial.

A separate Python process converts ``delta-f10-200t`` (752 checkpoints) of the
real fixture and is killed with ``kill -9`` at a random moment after it is
ready: during the analysis, the rewrite, the verification, or parked in the
``before_commit`` hook with every row written but not committed. Afterwards the
thread's rows equal the original rows byte for byte (and no backup exists), or
a full-mode accessor reads every checkpoint as the manifest says (and exactly
one backup exists). A final unkilled run converts the thread, as a restarted
worker would.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from deerflow.convert import convert_thread, list_backups, revert_thread
from deerflow.digest import messages_sha256
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.support import backup_ids, config_for, execute, open_saver, raw_rows, settle

THREAD = "delta-f10-200t"
ROOT = Path(__file__).resolve().parents[3]
CHILD = r"""
import json, sys, time
from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import convert_thread

database = DatabaseConfig(**json.loads(sys.argv[1]))
pause = sys.argv[3] == "pause"

def before_commit(session):
    print("before_commit", flush=True)
    if pause:
        time.sleep(600)

print("ready", flush=True)
report = convert_thread(database, sys.argv[2], integrity=False, before_commit=before_commit)
print("done", report.status, flush=True)
"""


def _kill_during_conversion(db, plan: float | str) -> str:
    """Run the child; SIGKILL it ``plan`` seconds after it is ready (or once parked before commit).
    Returns what the child had printed last."""
    stderr = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a chatty child can never block on it
    proc = subprocess.Popen([sys.executable, "-c", CHILD, db.model_dump_json(), THREAD,
                             "pause" if plan == "pause" else "run"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            proc.wait(timeout=30)
            stderr.seek(0)
            pytest.fail(f"conversion child did not start: {stderr.read()}")
        last = "ready"
        if plan == "pause":
            last = proc.stdout.readline().strip()
            assert last == "before_commit"
        else:
            try:
                proc.wait(timeout=plan)
                last = "exited"
            except subprocess.TimeoutExpired:
                last = "killed"
        proc.kill()  # SIGKILL
        proc.wait(timeout=30)
        settle(db, THREAD)  # the killed child's server backend may still be committing
        return last
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        stderr.close()


def _full_mode_matches_manifest(db, manifest: dict[str, Any]) -> list[str]:
    thread = next(t for t in manifest["threads"] if t["thread_id"] == THREAD)
    expected = [(c["checkpoint_id"], c["messages_sha256"]) for c in thread["backends"][db.backend]["checkpoints"]]
    with open_saver(db) as saver:
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        got = [(s.config["configurable"]["checkpoint_id"], messages_sha256(s.values.get("messages") or []))
               for s in full.iter_history(config_for(THREAD))]
    return [f"{g} != {e}" for g, e in zip(got, expected, strict=False) if g != e] + (
        [f"{len(got)} readings, expected {len(expected)}"] if len(got) != len(expected) else [])


@pytest.mark.slow
def test_sigkill_leaves_the_thread_untouched_or_fully_converted(fixture_db, manifest):
    db = fixture_db
    original = raw_rows(db, THREAD)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    plans: list[float | str] = [rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(3.0, 6.0),
                                rng.uniform(6.0, 12.0), "pause"]
    outcomes = []
    for plan in plans:
        started = time.monotonic()
        last = _kill_during_conversion(db, plan)
        where = f"seed={seed} plan={plan} child={last}"
        rows = raw_rows(db, THREAD)
        if rows == original:
            outcomes.append(("untouched", plan, last))
            assert backup_ids(db) == [], where
        else:
            outcomes.append(("converted", plan, last))
            assert _full_mode_matches_manifest(db, manifest) == [], where
            backups = list_backups(db, THREAD)
            assert [b.status for b in backups] == ["active"], where
            # back to the original for the next trial (verified, byte-identical)
            assert revert_thread(db, backups[0].backup_id).status == "reverted", where
            assert raw_rows(db, THREAD) == original, where
            # forget the restored backup's record so the next trial's "no backup" check starts clean
            execute(db, "DELETE FROM dfa_backups WHERE backup_id = ?", (backups[0].backup_id,))
        if plan == "pause":
            # every row was written and verified, but not committed: nothing may survive the kill
            assert outcomes[-1][0] == "untouched", where
        print(f"\n[{db.backend}] kill plan={plan} after {time.monotonic() - started:.1f}s "
              f"-> {outcomes[-1][0]} ({last})")

    # the restarted worker: a clean run converts the thread completely
    report = convert_thread(db, THREAD, integrity=False)
    assert report.status == "converted", report.error
    assert _full_mode_matches_manifest(db, manifest) == []

