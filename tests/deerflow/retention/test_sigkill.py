"""SIGKILL in the middle of a prune: the thread is either untouched or completely pruned, never partial.

A child process runs ``keep_last(5)`` on ``delta-f10-200t`` (752 checkpoints, the
head chain rebased) of a private copy of the real fixture and is killed with
``kill -9``: at a seeded random delay drawn uniformly from 0 to the prune time
an unkilled calibration run measured (a child that finished first is not a
kill; the draw is repeated), 25 kills per backend, plus 4 kills per backend
0-10 ms after the ``before_commit`` hook reported (every row written and
verified, the commit follows). After each kill the thread's rows equal the
original byte for byte with no backup (*untouched*), or hold exactly the
calibration run's kept checkpoints, every one reading with the manifest's
digests, with exactly one active backup that reverts it byte for byte
(*pruned*). Anything else is *partial*. Another thread is never touched.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from deerflow.convert import list_backups
from tests.deerflow.convert.support import backup_ids, execute, raw_rows, settle
from tests.deerflow.retention.support import all_keys, read
from tests.manage_forks import ForkedScript

pytestmark = pytest.mark.slow

THREAD, NEIGHBOUR = "delta-f10-200t", "delta-f10-50t"
ROOT = Path(__file__).resolve().parents[3]
SEED = int(os.environ.get("DFA_CRASH_SEED", "20251201"))
KILLS, COMMIT_KILLS = 25, 4
CHILD = r"""
import json, sys, time
from deerflow.config.database_config import DatabaseConfig
from deerflow.retention import keep_last

database = DatabaseConfig(**json.loads(sys.argv[1]))
print("ready", flush=True)
started = time.monotonic()
report = keep_last(database, sys.argv[2], 5, before_commit=lambda store: print("before_commit", flush=True))
print("done", report.status, round(time.monotonic() - started, 3), " ".join(report.kept_checkpoint_ids), flush=True)
"""


def _run(db, delay: float | None = None, *, at_commit: float | None = None) -> tuple[str, list[str]]:
    """Run the child; kill it ``delay`` s after ready (or ``at_commit`` s after before_commit).

    ``(last line, words)``."""
    proc = ForkedScript(CHILD, [db.model_dump_json(), THREAD], ROOT)
    try:
        line = proc.stdout.readline().strip()
        if line != "ready":
            proc.wait(timeout=30)
            pytest.fail(f"prune child did not start: {proc.stderr_path.read_text()}")
        if delay is None and at_commit is None:
            out = proc.stdout.read().strip().splitlines()
            proc.wait(timeout=120)
            return "done", out[-1].split()
        if at_commit is not None:
            assert proc.stdout.readline().strip() == "before_commit"
            time.sleep(at_commit)
        elif not proc.kill_after(delay or 0):
            return "exited", []
        proc.kill()
        proc.wait(timeout=30)
        settle(db, THREAD)  # the killed child's server backend may still be committing
        return "killed", []
    finally:
        proc.close()


def _classify(db, original, expected_kept: set[str], manifest_digests) -> str:
    if raw_rows(db, THREAD) == original:
        assert [b for b in list_backups(db, THREAD) if b.status == "active"] == []
        return "untouched"
    kept = all_keys(db, THREAD)
    assert {cid for _ns, cid in kept} == expected_kept, "partial: kept set differs"
    got = read(db, THREAD, kept)
    assert all(got[k] == manifest_digests[k] for k in kept), "partial: a kept checkpoint reads differently"
    active = [b for b in list_backups(db, THREAD) if b.status == "active"]
    assert len(active) == 1, "partial: no single active backup"
    from deerflow.retention import revert_prune

    assert revert_prune(db, active[0].backup_id).status == "reverted"
    assert raw_rows(db, THREAD) == original, "revert is not byte-identical"
    execute(db, "DELETE FROM dfa_backups WHERE backup_id = ?", (active[0].backup_id,))
    return "pruned"


def test_sigkill_during_a_prune_leaves_the_thread_untouched_or_pruned(fixture_db, manifest):
    db = fixture_db
    facts = next(t for t in manifest["threads"] if t["thread_id"] == THREAD)["backends"][db.backend]
    digests = {(c["checkpoint_ns"], c["checkpoint_id"]): (c["message_count"], c["messages_sha256"],
                                                         c["channels_sha256"]) for c in facts["checkpoints"]}
    original, neighbour = raw_rows(db, THREAD), raw_rows(db, NEIGHBOUR)
    last, words = _run(db)  # calibration: an unkilled prune, then reverted
    assert words[:2] == ["done", "pruned"], words
    duration, expected = float(words[2]), set(words[3:])
    assert _classify(db, original, expected, digests) == "pruned"
    execute(db, "DELETE FROM dfa_backups")
    rng = random.Random(SEED)
    outcomes: dict[str, int] = {"untouched": 0, "pruned": 0}
    kills = 0
    while kills < KILLS:
        delay = rng.uniform(0, duration * 1.1)
        last, _ = _run(db, delay)
        outcome = _classify(db, original, expected, digests)
        if last == "killed":
            kills += 1
            outcomes[outcome] += 1
    for _ in range(COMMIT_KILLS):
        last, _ = _run(db, at_commit=rng.uniform(0, 0.01))
        assert last == "killed"
        outcomes[_classify(db, original, expected, digests)] += 1
    assert raw_rows(db, NEIGHBOUR) == neighbour
    assert backup_ids(db) == []
    print(f"\n[{db.backend}] seed={SEED} prune {duration:.2f}s: {kills} random kills + {COMMIT_KILLS} at the commit "
          f"-> {outcomes}, partial 0")
