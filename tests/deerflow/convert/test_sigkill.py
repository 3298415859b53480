"""SIGKILL in the middle of a conversion: the thread is either untouched or fully converted, never partial.

A separate Python process converts ``delta-f10-200t`` (752 checkpoints) of the
real fixture and is killed with ``kill -9`` at a random moment after it is
ready: during the analysis, the rewrite, the verification, or parked in the
``before_commit`` hook with every row written but not committed. The first
child runs to the end and times the conversion (about half a second now), so
the kill moments that follow fall inside it. Afterwards the thread's rows equal
the original rows byte for byte (and no backup exists), or they equal, byte for
byte, a conversion that a full-mode accessor read as the manifest says (and
exactly one backup exists); conversion is deterministic, and a converted thread
that differs from that reference is read in full mode checkpoint by checkpoint.
A final unkilled run converts the thread, as a restarted worker would.
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from deerflow.convert import convert_thread, list_backups, revert_thread
from deerflow.convert.digest import messages_sha256
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.support import backup_ids, config_for, execute, open_saver, raw_rows, settle
from tests.manage_forks import ForkedScript

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
started = time.monotonic()
report = convert_thread(database, sys.argv[2], integrity=False, before_commit=before_commit)
print("done", report.status, time.monotonic() - started, flush=True)
"""


def _kill_during_conversion(db, plan: float | str | None) -> tuple[str, float | None]:
    """Run the child; SIGKILL it ``plan`` seconds after it is ready (``"pause"``: once parked before commit;
    ``None``: never, it runs to the end). Returns what the child had printed last and, for a child that
    finished, its conversion's seconds."""
    proc = ForkedScript(CHILD, [db.model_dump_json(), THREAD, "pause" if plan == "pause" else "run"], ROOT)
    try:
        if proc.stdout.readline().strip() != "ready":
            proc.wait(timeout=30)
            pytest.fail(f"conversion child did not start: {proc.stderr_path.read_text()}")
        last, seconds = "ready", None
        if plan == "pause":
            last = proc.stdout.readline().strip()
            assert last == "before_commit"
        elif plan is None:
            lines = [proc.stdout.readline().split() for _ in range(2)]  # before_commit, then done
            done = lines[-1]
            assert lines[0] == ["before_commit"] and done[:2] == ["done", "converted"], lines
            last, seconds = "exited", float(done[2])
        else:
            try:
                proc.wait(timeout=plan)
                last = "exited"
            except subprocess.TimeoutExpired:
                last = "killed"
        proc.kill()  # SIGKILL
        proc.wait(timeout=30)
        settle(db, THREAD)  # the killed child's server backend may still be committing
        return last, seconds
    finally:
        proc.close()


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
    # The reference conversion, read in full mode as the manifest says, then reverted.
    assert convert_thread(db, THREAD, integrity=False).status == "converted"
    assert _full_mode_matches_manifest(db, manifest) == []
    converted = raw_rows(db, THREAD)
    _revert(db, original, "reference")

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    outcomes = []
    seconds = None
    for plan in [None, "random", "random", "random", "pause"]:
        if plan == "random":  # inside a conversion's time, as the first (unkilled) child measured it
            assert seconds is not None
            plan = rng.uniform(0.05, 0.95) * seconds
        started = time.monotonic()
        last, measured = _kill_during_conversion(db, plan)
        seconds = measured if measured is not None else seconds
        where = f"seed={seed} plan={plan} child={last}"
        rows = raw_rows(db, THREAD)
        if rows == original:
            outcomes.append(("untouched", plan, last))
            assert backup_ids(db) == [], where
        else:
            outcomes.append(("converted", plan, last))
            if rows != converted:  # not the reference's bytes: read every checkpoint
                assert _full_mode_matches_manifest(db, manifest) == [], where
            _revert(db, original, where)
        if plan == "pause":
            # every row was written and verified, but not committed: nothing may survive the kill
            assert outcomes[-1][0] == "untouched", where
        print(f"\n[{db.backend}] kill plan={plan} after {time.monotonic() - started:.1f}s "
              f"-> {outcomes[-1][0]} ({last})")
    assert outcomes[0][0] == "converted"  # the timing run

    # the restarted worker: a clean run converts the thread completely
    report = convert_thread(db, THREAD, integrity=False)
    assert report.status == "converted", report.error
    assert raw_rows(db, THREAD) == converted


def _revert(db, original: dict[str, Any], where: str) -> None:
    """Revert the thread's one active backup (verified, byte-identical), then forget the backup's record so
    the next trial's "no backup" check starts clean."""
    backups = list_backups(db, THREAD)
    assert [b.status for b in backups] == ["active"], where
    assert revert_thread(db, backups[0].backup_id).status == "reverted", where
    assert raw_rows(db, THREAD) == original, where
    execute(db, "DELETE FROM dfa_backups WHERE backup_id = ?", (backups[0].backup_id,))
