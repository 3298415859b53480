"""Keep-last of many Postgres threads in one transaction (:mod:`deerflow.retention.setbatch`): the same rows,
reports and backups as pruning each thread alone, every kept checkpoint reading as the manifest says, the
per-thread path for what the batch cannot prove, and nothing written when a check fails."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import deerflow.retention.batch as batch_module
import deerflow.retention.setbatch as setbatch_module
from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import list_backups
from deerflow.errors import StorageError
from deerflow.retention import keep_last, prune_threads, revert_prune
from deerflow.retention.batchcheck import BatchRollback
from deerflow.storage.addressing import config_for
from tests.backends import fresh_database
from tests.deerflow.convert.support import all_rows, execute, raw_rows
from tests.deerflow.retention.support import (
    all_keys,
    branched,
    copy_of,
    ids,
    pending_write,
    read,
    saver_for,
    thread_calls,
    turns,
)

_REPORT_FIELDS = ("status", "kept_checkpoint_ids", "deleted_checkpoint_ids", "protected", "rebased_checkpoint_ids",
                  "unbranchable_checkpoint_ids", "deleted_namespaces", "bytes_before", "bytes_after")


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[DatabaseConfig]:
    with fresh_database("postgres", tmp_path, prefix="dfa_retention") as database:
        yield database


@contextmanager
def each_alone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``prune_threads`` prunes every thread alone inside (the batch path answers nothing)."""
    with monkeypatch.context() as m:
        m.setattr(batch_module, "keep_last_in_batches", lambda *args, **kwargs: {})
        yield


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Thread ids ``prune_threads`` handed to the per-thread path."""
    return thread_calls(monkeypatch, batch_module, "prune_thread")


def _langgraph_rows(database: DatabaseConfig) -> dict[str, Any]:
    return {k: v for k, v in all_rows(database).items() if k in ("checkpoints", "checkpoint_blobs",
                                                                  "checkpoint_writes")}


def _backups(database: DatabaseConfig, thread_ids: list[str]) -> dict[str, Any]:
    out = {}
    for t in thread_ids:
        [info] = [b for b in list_backups(database, t) if b.status == "active"]
        out[t] = (info.checkpoint_rows, info.blob_rows, info.bytes, info.note)
    return out


def _threads(pg: DatabaseConfig) -> list[str]:
    """Four full-mode threads (one with a sibling branch and a pending write on its leaf), one delta thread whose
    keep-last-2 chain start stores no ``messages`` value (it needs a rebase)."""
    for t in ("full-a", "full-b"):
        turns(pg, t, 4, mode="full")
    _main, branch = branched(pg, "full-branched", mode="full")
    pending_write(pg, "full-branched", branch[-1])
    turns(pg, "full-short", 1, mode="full")
    turns(pg, "delta-a", 6, mode="delta")
    return ["full-a", "full-b", "full-branched", "full-short", "delta-a"]


@pytest.mark.parametrize("backup", [True, False])
def test_a_batch_leaves_the_rows_and_reports_pruning_each_thread_alone_leaves(pg, monkeypatch, alone, backup):
    threads = _threads(pg)
    original = {t: raw_rows(pg, t) for t in threads}
    with copy_of(pg) as copy:
        with each_alone(monkeypatch):
            by_itself = {r.thread_id: r for r in prune_threads(copy, threads, "keep_last", n=2, backup=backup)}
        alone.clear()
        reports = {r.thread_id: r for r in prune_threads(pg, threads, "keep_last", n=2, backup=backup)}
        assert _langgraph_rows(pg) == _langgraph_rows(copy)
        for t in threads:
            assert [getattr(reports[t], f) for f in _REPORT_FIELDS] == \
                [getattr(by_itself[t], f) for f in _REPORT_FIELDS], t
        if backup:
            pruned = [t for t in threads if reports[t].status == "pruned"]
            assert _backups(pg, pruned) == _backups(copy, pruned)
    # the full threads went in one transaction; the delta thread's chain start needs a rebase: alone
    assert alone == ["delta-a"] and reports["delta-a"].rebased_checkpoint_ids
    assert [reports[t].status for t in threads] == ["pruned"] * 5
    assert any(p["reason"] == "pending_writes" for p in reports["full-branched"].protected)
    for t in threads:
        assert {cid for _ns, cid in all_keys(pg, t)} == set(reports[t].kept_checkpoint_ids)
        if backup and reports[t].backup_id:
            assert revert_prune(pg, reports[t].backup_id).status == "reverted"
            assert raw_rows(pg, t) == original[t], t


def test_a_batch_of_the_real_fixture_reads_with_the_manifest_digests(postgres_fixture_db_rw, manifest, alone):
    db = postgres_fixture_db_rw
    threads = [t["thread_id"] for t in manifest["threads"]]
    original = {t: raw_rows(db, t) for t in threads}
    reports = {r.thread_id: r for r in prune_threads(db, threads, "keep_last", n=5)}
    assert all(r.status in ("pruned", "nothing_to_prune") for r in reports.values()), \
        [(r.thread_id, r.status, r.error) for r in reports.values() if r.failed]
    batched = [t for t in threads if t not in alone and reports[t].status == "pruned"]
    assert len(batched) >= 5  # the full-mode threads at least
    for thread in manifest["threads"]:
        t = thread["thread_id"]
        expected = {(c["checkpoint_ns"], c["checkpoint_id"]): (c["message_count"], c["messages_sha256"],
                                                               c["channels_sha256"])
                    for c in thread["backends"]["postgres"]["checkpoints"]}
        kept = all_keys(db, t)
        assert {cid for _ns, cid in kept} == set(reports[t].kept_checkpoint_ids), t
        got = read(db, t, kept)
        assert {k: got[k] for k in kept} == {k: expected[k] for k in kept}, t
    for t in batched:
        assert revert_prune(db, reports[t].backup_id).status == "reverted"
        assert raw_rows(db, t) == original[t], t


def test_a_blob_no_checkpoint_names_goes_with_the_prune_and_comes_back_with_the_revert(pg, alone):
    turns(pg, "t", 4, mode="full")
    execute(pg, "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
                "VALUES ('t', '', 'messages', '00000000000000000000000000000999.0.1', 'msgpack', '\\x90')")
    original = raw_rows(pg, "t")
    [report] = prune_threads(pg, ["t"], "keep_last", n=2)
    assert report.status == "pruned" and alone == []
    left = execute(pg, "SELECT version FROM checkpoint_blobs WHERE thread_id = 't'")
    assert ("00000000000000000000000000000999.0.1",) not in left
    # what is left is what the kept checkpoints name
    named = execute(pg, "SELECT DISTINCT v.key, v.value FROM checkpoints c CROSS JOIN LATERAL "
                        "jsonb_each_text(c.checkpoint -> 'channel_versions') v WHERE c.thread_id = 't'")
    assert {tuple(r) for r in execute(pg, "SELECT channel, version FROM checkpoint_blobs WHERE thread_id = 't'")} \
        <= {tuple(r) for r in named}
    assert revert_prune(pg, report.backup_id).status == "reverted" and raw_rows(pg, "t") == original


def test_the_per_thread_path_also_deletes_a_blob_no_checkpoint_names(pg):
    turns(pg, "t", 4, mode="full")
    execute(pg, "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
                "VALUES ('t', '', 'todos', '7', 'msgpack', '\\x90')")
    report = keep_last(pg, "t", 2)
    assert report.status == "pruned"
    assert execute(pg, "SELECT COUNT(*) FROM checkpoint_blobs WHERE thread_id = 't' AND version = '7'") == [(0,)]


def test_a_pending_write_of_a_channel_the_chain_start_never_had_leaves_the_thread_to_the_per_thread_path(
        pg, alone):
    for t in ("a", "b"):
        turns(pg, t, 4, mode="full")
    oldest = ids(pg, "a")[1]
    # a write of a channel LangGraph's reader rebuilds from ancestors (todos) under a checkpoint the prune deletes
    with saver_for(pg) as saver:
        saver.put_writes(config_for("a", "", oldest), [("todos", [{"content": "x", "status": "pending"}])], "task-t")
    reports = prune_threads(pg, ["a", "b"], "keep_last", n=2)
    assert [r.status for r in reports] == ["pruned", "pruned"]
    assert alone == ["a"]  # "b" went in the batch
    assert execute(pg, "SELECT COUNT(*) FROM checkpoint_writes WHERE thread_id = 'a' AND channel = 'todos'") == [(0,)]


def test_a_failed_check_writes_nothing_and_each_thread_is_pruned_alone(pg, alone, monkeypatch):
    for t in ("a", "b"):
        turns(pg, t, 3, mode="full")
    before = _langgraph_rows(pg)
    inside: list[int] = []

    def failing(plans: Any, after: Any, *args: Any) -> None:
        inside.append(sum(len(a.left) for a in after.values()))
        raise BatchRollback(next(iter(plans)))

    monkeypatch.setattr(setbatch_module, "_verify", failing)
    reports = prune_threads(pg, ["a", "b"], "keep_last", n=1)
    assert inside == [2]  # the batch had deleted all but the two heads inside its transaction...
    assert alone == ["a", "b"]  # ...rolled back, and each thread was pruned alone
    assert [r.status for r in reports] == ["pruned", "pruned"]
    assert _langgraph_rows(pg) != before and all(len(ids(pg, t)) == 1 for t in ("a", "b"))


def test_a_failed_check_leaves_nothing_written_when_the_per_thread_path_fails_too(pg, monkeypatch):
    turns(pg, "a", 3, mode="full")
    before = _langgraph_rows(pg)
    monkeypatch.setattr(setbatch_module, "_verify", lambda plans, *a: _raise(BatchRollback("a")))
    monkeypatch.setattr(batch_module, "prune_thread", lambda *a, **k: _raise(RuntimeError("stop")))
    with pytest.raises(RuntimeError, match="stop"):
        prune_threads(pg, ["a"], "keep_last", n=1)
    assert _langgraph_rows(pg) == before and list_backups(pg, "a") == []


def _raise(exc: Exception) -> None:
    raise exc


def test_a_kept_blob_rewritten_inside_the_batch_fails_the_check_even_with_the_same_bytes(pg, alone, monkeypatch):
    for t in ("a", "b"):
        turns(pg, t, 3, mode="full")
    real = setbatch_module._delete

    def rewriting(session: Any, *args: Any) -> Any:
        counts = real(session, *args)
        session.execute("UPDATE checkpoint_blobs SET blob = blob WHERE thread_id = ?", ["a"])  # new row versions
        return counts

    monkeypatch.setattr(setbatch_module, "_delete", rewriting)
    reports = prune_threads(pg, ["a", "b"], "keep_last", n=1)
    assert alone == ["a", "b"]  # the batch rolled back: a kept row is not the row it was
    assert [r.status for r in reports] == ["pruned", "pruned"]


def test_two_batches_run_at_once_on_two_connections_and_leave_what_each_thread_alone_leaves(pg, monkeypatch, alone):
    threads = [f"full-{i}" for i in range(8)]
    for i, t in enumerate(threads):
        turns(pg, t, 3 + i % 3, mode="full")
    assert setbatch_module.batches_of(threads) == [threads[:4], threads[4:]]
    with copy_of(pg) as copy:
        with each_alone(monkeypatch):
            by_itself = {r.thread_id: r for r in prune_threads(copy, threads, "keep_last", n=2)}
        alone.clear()
        lanes: list[tuple[int, list[str]]] = []
        real = setbatch_module._prune

        def recording(session: Any, chunk: list[str], *args: Any) -> Any:
            lanes.append((session.conn.info.backend_pid, chunk))
            return real(session, chunk, *args)

        monkeypatch.setattr(setbatch_module, "_prune", recording)
        # the backup tables do not exist yet: they are made once, before the two transactions
        assert execute(pg, "SELECT to_regclass('dfa_backup_checkpoints') IS NULL") == [(True,)]
        reports = {r.thread_id: r for r in prune_threads(pg, threads, "keep_last", n=2)}
        assert alone == [] and sorted(chunk for _pid, chunk in lanes) == [threads[:4], threads[4:]]
        assert len({pid for pid, _chunk in lanes}) == 2  # two connections
        assert _langgraph_rows(pg) == _langgraph_rows(copy)
        assert {t: [getattr(r, f) for f in _REPORT_FIELDS] for t, r in reports.items()} == \
            {t: [getattr(r, f) for f in _REPORT_FIELDS] for t, r in by_itself.items()}
        assert _backups(pg, threads) == _backups(copy, threads)


@pytest.mark.parametrize(("count", "sizes"), [(0, []), (1, [1]), (5, [5]), (6, [3, 3]), (10, [5, 5]),
                                              (50, [25, 25]), (60, [25, 25, 10])])
def test_the_batches_are_as_many_as_the_lanes_when_each_gets_enough_threads(count, sizes):
    threads = [f"t{i:03d}" for i in range(count)][::-1]
    batches = setbatch_module.batches_of(threads)
    assert [len(b) for b in batches] == sizes
    assert all(b == sorted(b) for b in batches) and sorted(t for b in batches for t in b) == sorted(threads)


def test_an_error_in_one_lane_stops_the_other_after_the_batch_it_is_in(pg, monkeypatch):
    threads = [f"t{i:03d}" for i in range(60)]
    batches = setbatch_module.batches_of(threads)
    assert [len(b) for b in batches] == [25, 25, 10]  # lane one: the first and the third; lane two: the second
    started: list[str] = []

    def pruning(session: Any, chunk: list[str], *args: Any) -> Any:
        started.append(chunk[0])
        if chunk == batches[1]:
            raise RuntimeError("lane two failed")
        time.sleep(0.5)  # lane one is in its first batch when lane two fails
        return {}, set()

    monkeypatch.setattr(setbatch_module, "_prune", pruning)
    with pytest.raises(RuntimeError, match="lane two failed"):
        prune_threads(pg, threads, "keep_last", n=2)
    assert sorted(started) == [batches[0][0], batches[1][0]]  # the third batch was never begun


def test_backup_tables_that_cannot_be_made_send_each_thread_alone(pg, monkeypatch, alone):
    threads = [f"full-{i}" for i in range(6)]
    for t in threads:
        turns(pg, t, 3, mode="full")

    def refusing(session: Any) -> None:
        raise StorageError(RuntimeError("permission denied for schema public"))

    monkeypatch.setattr(setbatch_module, "backups", SimpleNamespace(ensure_whole_thread_tables=refusing))
    reports = prune_threads(pg, threads, "keep_last", n=1)
    assert alone == threads  # no batch ran: the per-thread path makes the tables its own way
    assert [r.status for r in reports] == ["pruned"] * 6 and all(len(ids(pg, t)) == 1 for t in threads)
