"""The set-based prune path (Postgres) and the batch: the same rows as the general path and as LangGraph's own
``prune``, backups that revert byte for byte, verification that rolls back, the general path where it is needed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver

import deerflow.retention.batch as batch_module
import deerflow.retention.prune as prune_module
import deerflow.retention.setprune as setprune_module
from deerflow.config.database_config import DatabaseConfig
from deerflow.retention import keep_last, prune_threads, revert_prune, safe_only
from deerflow.retention.delegate import saver_prunes
from tests.backends import fresh_database
from tests.deerflow.convert.support import all_rows, backup_ids, execute, raw_rows
from tests.deerflow.retention.support import (
    branched,
    copy_of,
    duration_stamp,
    ids,
    pending_write,
    read,
    thread_calls,
    turns,
)

HAS_PRUNE = saver_prunes(PostgresSaver)


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[DatabaseConfig]:
    with fresh_database("postgres", tmp_path, prefix="dfa_retention") as database:
        yield database


@pytest.fixture
def general_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Thread ids the general path (the walk of every checkpoint) pruned."""
    return thread_calls(monkeypatch, prune_module, "_prune_once")


@contextmanager
def general_path_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as m:
        m.setattr(prune_module, "_has_set_based_path", lambda store: False)
        yield


def test_it_prunes_a_full_thread_without_the_walk_and_as_the_general_path_does(pg, monkeypatch, general_calls):
    main, branch = branched(pg, "t", mode="full")
    pending_write(pg, "t", branch[-1])
    original = raw_rows(pg, "t")
    with general_path_only(monkeypatch):
        general = keep_last(pg, "t", 2)
    assert general.status == "pruned" and general_calls == ["t"]
    pruned_rows = raw_rows(pg, "t")
    assert revert_prune(pg, general.backup_id).status == "reverted" and raw_rows(pg, "t") == original

    report = keep_last(pg, "t", 2)
    assert report.status == "pruned", report.error
    assert general_calls == ["t"]  # the set-based path pruned it
    assert raw_rows(pg, "t") == pruned_rows
    for key in ("kept_checkpoint_ids", "deleted_checkpoint_ids", "protected", "bytes_before", "bytes_after"):
        assert getattr(report, key) == getattr(general, key), key
    assert branch[-1] in report.kept_checkpoint_ids  # a leaf with a pending write is protected
    assert revert_prune(pg, report.backup_id).status == "reverted"
    assert raw_rows(pg, "t") == original


def test_its_backup_holds_the_whole_thread(pg):
    turns(pg, "t", 5, mode="full")
    stored = len(ids(pg, "t"))
    report = keep_last(pg, "t", 1)
    [[rows]] = execute(pg, "SELECT COUNT(*) FROM dfa_backup_checkpoints WHERE backup_id = ?", (report.backup_id,))
    assert report.status == "pruned" and rows == stored
    [[bytes_]] = execute(pg, "SELECT bytes FROM dfa_backups WHERE backup_id = ?", (report.backup_id,))
    assert bytes_ == report.bytes_before > report.bytes_after


def test_a_trailing_duration_stamp_goes_and_the_new_head_reads_as_the_old(pg, general_calls):
    turns(pg, "t", 3, mode="full")
    stamp = duration_stamp(pg, "t")
    head_before = read(pg, "t")
    report = safe_only(pg, "t")
    assert report.status == "pruned" and report.deleted_checkpoint_ids == [stamp] and general_calls == []
    new_head = max(ids(pg, "t"))
    assert read(pg, "t")[("", new_head)][:2] == head_before[("", stamp)][:2]


@pytest.mark.parametrize("keep", [2, 3])
def test_a_delta_thread_is_rebased_as_the_general_path_rebases_it(pg, monkeypatch, general_calls, keep):
    turns(pg, "t", 6, mode="delta")  # a snapshot every 4th update: keep 2 rebases the head's parent, 3 does not
    original, readings = raw_rows(pg, "t"), read(pg, "t")
    with general_path_only(monkeypatch):
        general = keep_last(pg, "t", keep)
    general_rows = raw_rows(pg, "t")
    assert general.status == "pruned" and revert_prune(pg, general.backup_id).status == "reverted"
    report = keep_last(pg, "t", keep)
    assert report.status == "pruned" and general_calls == ["t"], report.error
    assert report.rebased_checkpoint_ids == general.rebased_checkpoint_ids
    assert bool(report.rebased_checkpoint_ids) == (keep == 2)
    assert raw_rows(pg, "t") == general_rows
    assert read(pg, "t") == {k: v for k, v in readings.items() if k[1] in report.kept_checkpoint_ids}
    assert revert_prune(pg, report.backup_id).status == "reverted" and raw_rows(pg, "t") == original


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_a_dry_run_plans_alike_and_writes_nothing(pg, monkeypatch, general_calls, mode):
    branched(pg, "t", mode=mode)
    before = all_rows(pg)
    with general_path_only(monkeypatch):
        general = keep_last(pg, "t", 2, dry_run=True)
    report = keep_last(pg, "t", 2, dry_run=True)
    # the delta fork starts a turn over a checkpoint with pending writes: its rebase is the general path's
    assert general_calls == (["t"] if mode == "full" else ["t", "t"])
    assert report.status == general.status == "would_prune"
    assert report.as_dict() | {"duration_s": 0} == general.as_dict() | {"duration_s": 0}
    assert all_rows(pg) == before


def test_a_kept_row_changed_by_the_deletes_fails_verification_and_rolls_back(pg, monkeypatch):
    turns(pg, "t", 4, mode="full")
    original = raw_rows(pg, "t")
    head = max(ids(pg, "t"))
    real = setprune_module.delete_planned

    def corrupting(session: Any, thread_id: str, *args: Any, **kwargs: Any) -> None:
        real(session, thread_id, *args, **kwargs)
        session.execute("UPDATE checkpoints SET metadata = metadata || '{\"step\": 99}'::jsonb "
                        "WHERE thread_id = ? AND checkpoint_id = ?", [thread_id, head])

    monkeypatch.setattr(setprune_module, "delete_planned", corrupting)
    report = keep_last(pg, "t", 2)
    assert report.status == "verification_failed" and "stored rows changed" in report.error
    assert raw_rows(pg, "t") == original and backup_ids(pg) == []


def test_prune_threads_reports_each_thread_in_order(pg, general_calls):
    turns(pg, "a", 3, mode="full")
    turns(pg, "b", 4, mode="delta")
    reports = prune_threads(pg, ["b", "missing", "a", "b"], "keep_last", n=2)
    assert [(r.thread_id, r.status) for r in reports] == [("b", "pruned"), ("missing", "not_found"),
                                                          ("a", "pruned")]
    assert all(r.backup_id for r in reports if r.status == "pruned")
    with pytest.raises(ValueError, match="n >= 1"):
        prune_threads(pg, ["a"], "keep_last", n=0)


@pytest.mark.skipif(not HAS_PRUNE, reason="this langgraph-checkpoint-postgres has no prune")
def test_keep_last_1_without_backup_is_langgraphs_prune_verified(pg, monkeypatch):
    for t in ("a", "b", "c"):
        turns(pg, t, 4, mode="full")
    branched(pg, "forked", mode="full")
    turns(pg, "delta", 4, mode="delta")
    delta_head = read(pg, "delta")[("", max(ids(pg, "delta")))]
    handed: list[list[str]] = []
    real = PostgresSaver.prune

    def spy(self: Any, thread_ids: Any, **kwargs: Any) -> None:
        handed.append(sorted(thread_ids))
        real(self, thread_ids, **kwargs)

    with copy_of(pg) as theirs:
        with psycopg.connect(theirs.postgres_url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
            PostgresSaver(conn).prune(["a", "b", "c", "forked"], strategy="keep_latest")
        expected = all_rows(theirs)
        monkeypatch.setattr(PostgresSaver, "prune", spy)
        reports = prune_threads(pg, ["a", "b", "c", "forked", "delta"], "keep_last", n=1, backup=False)
    assert [r.status for r in reports] == ["pruned"] * 5
    assert handed == [["a", "b", "c", "forked"]]  # LangGraph refuses the delta thread: ours prunes it
    assert read(pg, "delta") == {("", max(ids(pg, "delta"))): delta_head}
    ours = all_rows(pg)
    assert {k: [r for r in v if r[0] != "delta"] for k, v in ours.items()} == \
        {k: [r for r in v if r[0] != "delta"] for k, v in expected.items()}
    assert [len(r.kept_checkpoint_ids) for r in reports[:4]] == [1, 1, 1, 1]


@pytest.mark.skipif(not HAS_PRUNE, reason="this langgraph-checkpoint-postgres has no prune")
def test_a_failed_check_after_langgraphs_prune_rolls_the_batch_back(pg, monkeypatch):
    for t in ("a", "b"):
        turns(pg, t, 3, mode="full")
    before = {t: raw_rows(pg, t) for t in ("a", "b")}
    import deerflow.retention.delegate as delegate_module
    from deerflow.retention.batchcheck import BatchRollback

    def failing(*args: Any, **kwargs: Any) -> None:
        raise BatchRollback("a")

    monkeypatch.setattr(delegate_module, "verify_batch", failing)
    used: list[Any] = []
    real = batch_module.SharedConnection.session

    def counting(self: Any, **kwargs: Any) -> Any:
        used.append(kwargs)
        return real(self, **kwargs)

    monkeypatch.setattr(batch_module.SharedConnection, "session", counting)
    reports = prune_threads(pg, ["a", "b"], "keep_last", n=1, backup=False)
    assert [r.status for r in reports] == ["pruned", "pruned"]  # our own path, after the rollback
    # LangGraph's prune rolled back, then both threads in one transaction of our own batch path
    assert used == [{"write": True, "repeatable_read": True}] * 2
    for t in ("a", "b"):
        assert len(ids(pg, t)) == 1 and raw_rows(pg, t) != before[t]


def test_a_batch_reports_the_threads_it_leaves_as_they_are_without_pruning_each(pg, monkeypatch):
    turns(pg, "short", 1, mode="full")
    turns(pg, "forked", 1, mode="delta")
    branched(pg, "branched", mode="full")  # a sibling branch goes, however few checkpoints the thread has
    n = max(len(ids(pg, t)) for t in ("short", "forked", "branched"))
    one_by_one = {t: keep_last(pg, t, n, dry_run=True) for t in ("short", "forked", "branched")}
    assert [r.status for r in one_by_one.values()] == ["nothing_to_prune", "nothing_to_prune", "would_prune"]
    pruned: list[str] = []
    real = batch_module.prune_thread

    def spy(target: Any, thread_id: str, *args: Any, **kwargs: Any) -> Any:
        pruned.append(thread_id)
        return real(target, thread_id, *args, **kwargs)

    monkeypatch.setattr(batch_module, "prune_thread", spy)
    before = all_rows(pg)
    reports = prune_threads(pg, ["short", "forked", "branched"], "keep_last", n=n, dry_run=True)
    assert pruned == ["branched"] and all_rows(pg) == before
    for report in reports:
        assert report.as_dict() | {"duration_s": 0} == one_by_one[report.thread_id].as_dict() | {"duration_s": 0}
    assert reports[0].kept_checkpoint_ids == sorted(ids(pg, "short"))
    assert reports[0].protected == [{"checkpoint_ns": "", "checkpoint_id": max(ids(pg, "short")), "reason": "head"}]
