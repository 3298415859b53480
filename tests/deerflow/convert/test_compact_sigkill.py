"""SIGKILL in the middle of a compaction: the thread is untouched or completely compacted, never partial.

Per backend, a private copy of the real fixture; the test process forks a
child per trial (as Celery's prefork pool forks its workers) that runs
``compact_thread`` on ``full-tools-30t`` (152 checkpoints) with the integrity
check on, and SIGKILLs it after a seeded delay drawn uniformly from 0 to the
time an unkilled calibration run took. A delay that lands after the child
finished does not count as a kill; trials go on until KILLS live children were
killed. COMMIT_KILLS more children are parked in the ``before_commit`` hook
(every row written and verified, not committed) and killed there: nothing may
survive. After every trial the thread is classified:

* ``untouched``: its rows equal the original rows byte for byte and no backup exists;
* ``compacted``: every checkpoint reads through the delta-mode accessor with the
  manifest's digest, every checkpoint carries the DeerFlow delta marker, and
  exactly one active backup exists (then it is reverted, byte-identically, for the next trial);
* anything else is ``partial`` and fails the test.

Reproduce with ``DFA_CRASH_SEED=<seed>``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from typing import Any

import pytest

from deerflow.convert import list_backups, revert_thread
from deerflow.convert.compactor import compact_thread
from deerflow.convert.digest import messages_sha256
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.support import backup_ids, config_for, execute, open_saver, raw_rows, settle

pytestmark = pytest.mark.slow

THREAD = "full-tools-30t"
K = 10
KILLS = 25  # per backend: 50 in all
COMMIT_KILLS = 2
SEED = int(os.environ.get("DFA_CRASH_SEED", "20261201"))


def _child(db, pause: bool, ready_w: int) -> None:
    """In the forked child: compact, then leave without running the parent's cleanup."""
    code = 0
    try:
        def hook(session: Any) -> None:
            if pause:
                os.write(ready_w, b"c")
                time.sleep(600)

        compact_thread(db, THREAD, snapshot_frequency=K, before_commit=hook)
    except BaseException:  # noqa: BLE001 - the child only reports by its exit code
        code = 1
    os._exit(code)


def _run(db, *, delay: float | None = None, pause: bool = False) -> str:
    """Fork a compaction; SIGKILL it after ``delay`` seconds (or once parked before commit).

    Returns ``killed`` (the child was alive when killed) or ``finished``.
    """
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        _child(db, pause, ready_w)
    os.close(ready_w)
    try:
        if pause:
            assert os.read(ready_r, 1) == b"c"
        else:
            deadline = time.monotonic() + (delay or 0.0)
            while time.monotonic() < deadline:
                done, _status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return "finished"
                time.sleep(0.005)
        os.kill(pid, signal.SIGKILL)
        _done, status = os.waitpid(pid, 0)
        settle(db, THREAD)  # the killed child's server backend may still be committing
        return "killed" if os.WIFSIGNALED(status) else "finished"
    finally:
        os.close(ready_r)


def _reads_as_manifest(db, manifest: dict[str, Any]) -> bool:
    thread = next(t for t in manifest["threads"] if t["thread_id"] == THREAD)
    want = [(c["checkpoint_id"], c["messages_sha256"]) for c in thread["backends"][db.backend]["checkpoints"]]
    with open_saver(db) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
        got = [(s.config["configurable"]["checkpoint_id"], messages_sha256(s.values.get("messages") or []))
               for s in accessor.iter_history(config_for(THREAD))]
    column = "metadata" if db.backend == "sqlite" else "metadata::text"
    marked = all(json.loads(m).get(CHECKPOINT_MODE_METADATA_KEY) == "delta" for (m,) in execute(
        db, f"SELECT {column} FROM checkpoints WHERE thread_id = ?", (THREAD,)))
    return got == want and marked


def _classify(db, manifest: dict[str, Any], original: dict[str, Any]) -> str:
    """``untouched`` / ``compacted`` (reverted again afterwards) / ``partial``."""
    if raw_rows(db, THREAD) == original:
        left = backup_ids(db)
        return "untouched" if left == [] else f"partial: original rows, but backups {left} left"
    backups = list_backups(db, THREAD)
    active = [b for b in backups if b.status == "active"]
    if len(active) != 1:
        return f"partial: rows changed, backups {[(b.backup_id, b.status) for b in backups]}"
    if not _reads_as_manifest(db, manifest):
        return "partial: rows changed and do not read as the manifest"
    assert revert_thread(db, active[0].backup_id).status == "reverted"
    assert raw_rows(db, THREAD) == original
    execute(db, "DELETE FROM dfa_backups WHERE backup_id = ?", (active[0].backup_id,))
    return "compacted"


def test_sigkill_during_compaction_leaves_no_partial_thread(fixture_db, manifest):
    db = fixture_db
    original = raw_rows(db, THREAD)
    started = time.monotonic()
    assert _run(db, delay=120) == "finished"
    calibration = time.monotonic() - started
    assert _classify(db, manifest, original) == "compacted"

    rng = random.Random(SEED + (db.backend == "postgres"))
    outcomes: Counter[str] = Counter()
    kills, trials = 0, 0
    while kills < KILLS:
        trials += 1
        assert trials < 4 * KILLS, f"too few live kills: {kills} of {trials} (seed {SEED})"
        delay = rng.uniform(0, calibration)
        if _run(db, delay=delay) == "killed":
            kills += 1
        outcome = _classify(db, manifest, original)
        assert not outcome.startswith("partial"), f"seed={SEED} delay={delay:.3f}s: {outcome}"
        outcomes[outcome] += 1
    for _ in range(COMMIT_KILLS):
        assert _run(db, pause=True) == "killed"
        assert _classify(db, manifest, original) == "untouched", "a kill before commit left rows behind"
        outcomes["untouched at commit"] += 1
    print(f"\n[{db.backend}] calibration {calibration:.2f}s, {kills} kills in {trials} trials, "
          f"+{COMMIT_KILLS} at commit: {dict(outcomes)}, seed {SEED}")
    # the restarted worker compacts the thread completely
    assert compact_thread(db, THREAD, snapshot_frequency=K).status == "compacted"
    assert _reads_as_manifest(db, manifest)
