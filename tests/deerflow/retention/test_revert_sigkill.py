"""SIGKILL in the middle of a revert: the thread is still as the rewrite left it (its backup active), or it is
back, byte for byte, as it was before the rewrite (its backup used); never partial.

Both kinds of backup a revert job restores, on both backends, from a private copy of the real fixture:

* a prune's (``keep_last(5)`` of ``delta-f10-200t``: 752 checkpoints, the kept chain's oldest rebased),
  reverted by :func:`deerflow.retention.revert_prune`;
* a conversion's (``delta-f10-200t`` converted to full), reverted by :func:`deerflow.convert.revert_thread`.

For each, an unkilled child first times the revert (and the test rewrites the thread again); then a child
reverting it is killed with ``kill -9`` at a seeded random delay between 0 and 1.1 times that time (a
child that finished first is not a kill; the draw is repeated), 13 kills per kind and backend: 52 in all.
After each kill the thread's rows are the rewritten rows with the backup still active (*not reverted*), or
the original rows with no active backup (*reverted*: then the thread is rewritten again for the next
trial). Anything else is *partial*. Another thread is never touched.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deerflow.convert import convert_thread, list_backups
from deerflow.retention import keep_last
from tests.deerflow.convert.support import backup_ids, execute, raw_rows, settle
from tests.manage_forks import ForkedScript

pytestmark = pytest.mark.slow

THREAD, NEIGHBOUR = "delta-f10-200t", "delta-f10-50t"
ROOT = Path(__file__).resolve().parents[3]
SEED = int(os.environ.get("DFA_CRASH_SEED", "20251205"))
KILLS = int(os.environ.get("DFA_REVERT_KILLS", "13"))
CHILD = r"""
import json, sys, time
from deerflow.config.database_config import DatabaseConfig

database = DatabaseConfig(**json.loads(sys.argv[1]))
if sys.argv[3] == "prune":
    from deerflow.retention import revert_prune as revert
else:
    from deerflow.convert import revert_thread as revert
print("ready", flush=True)
started = time.monotonic()
report = revert(database, sys.argv[2])
print("done", report.status, round(time.monotonic() - started, 3), flush=True)
"""


def _prune(db: Any) -> str:
    report = keep_last(db, THREAD, 5)
    assert report.status == "pruned" and report.rebased_checkpoint_ids, report.as_dict()
    return str(report.backup_id)


def _convert(db: Any) -> str:
    report = convert_thread(db, THREAD, integrity=False)
    assert report.status == "converted", report.error
    return str(report.backup_id)


REWRITES: dict[str, Callable[[Any], str]] = {"prune": _prune, "conversion": _convert}


def _run(db: Any, backup_id: str, kind: str, delay: float | None) -> tuple[str, list[str]]:
    """Run the reverting child; kill it ``delay`` s after it is ready (``None``: let it finish)."""
    proc = ForkedScript(CHILD, [db.model_dump_json(), backup_id, kind], ROOT)
    try:
        if proc.stdout.readline().strip() != "ready":
            proc.wait(timeout=30)
            pytest.fail(f"revert child did not start: {proc.stderr_path.read_text()}")
        if delay is None:
            words = proc.stdout.read().split()
            proc.wait(timeout=120)
            return "done", words
        if not proc.kill_after(delay):
            return "exited", []
        settle(db, THREAD)  # the killed child's server backend may still be committing
        return "killed", []
    finally:
        proc.close()


def _outcome(db: Any, original: Any, rewritten: Any, backup_id: str) -> str:
    rows = raw_rows(db, THREAD)
    active = [b.backup_id for b in list_backups(db, THREAD) if b.status == "active"]
    if rows == rewritten:
        assert active == [backup_id], "partial: the rewritten thread lost its active backup"
        return "not_reverted"
    assert rows == original, "partial: the thread is neither as rewritten nor as it was"
    assert active == [], "partial: a reverted thread still has an active backup"
    return "reverted"


@pytest.mark.parametrize("kind", sorted(REWRITES))
def test_sigkill_during_a_revert_leaves_the_thread_rewritten_or_reverted(fixture_db, kind):
    db = fixture_db
    original, neighbour = raw_rows(db, THREAD), raw_rows(db, NEIGHBOUR)
    backup_id = REWRITES[kind](db)
    rewritten = raw_rows(db, THREAD)
    last, words = _run(db, backup_id, kind, None)  # calibration: an unkilled revert
    assert words[:2] == ["done", "reverted"], words
    duration = float(words[2])
    assert _outcome(db, original, rewritten, backup_id) == "reverted"
    execute(db, "DELETE FROM dfa_backups")
    rng = random.Random(f"{SEED}-{kind}-{db.backend}")
    outcomes = {"not_reverted": 0, "reverted": 0}
    kills = 0
    backup_id = REWRITES[kind](db)
    assert raw_rows(db, THREAD) == rewritten  # rewrites are deterministic: every trial starts from the same rows
    while kills < KILLS:
        last, _ = _run(db, backup_id, kind, rng.uniform(0, duration * 1.1))
        outcome = _outcome(db, original, rewritten, backup_id)
        if last == "killed":
            kills += 1
            outcomes[outcome] += 1
        if outcome == "reverted":
            execute(db, "DELETE FROM dfa_backups")
            backup_id = REWRITES[kind](db)
    assert raw_rows(db, NEIGHBOUR) == neighbour
    print(f"\n[{db.backend}] {kind} revert {duration:.2f}s seed={SEED}: {kills} kills -> {outcomes}, partial 0")
    assert backup_ids(db) == [backup_id]
