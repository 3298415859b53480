"""Compaction reads through a second connection while its backup is copied: same rows, same transaction.

On Postgres the walk reads the thread through :func:`deerflow.storage.sessions.open_snapshot_reader`
(the write transaction's exported snapshot, on a connection of its own) while the backup runs on the write
connection in a thread of its own; SQLite reads in the write session as before.
"""

from __future__ import annotations

import threading

import pytest

from deerflow.convert import backups, postgres_pages, revert_thread
from deerflow.convert.compact_writer import CompactionWriter
from deerflow.convert.compactor import compact_thread
from deerflow.errors import StorageError
from deerflow.storage.sessions import open_session, open_snapshot_reader
from tests.deerflow.convert.support import agent_graph, backup_ids, execute, human, open_saver, raw_rows, run_turn


def _full_thread(db, thread_id: str = "t", turns: int = 6) -> None:
    with open_saver(db) as saver:
        graph = agent_graph(saver, mode="full", tool_every=2)
        for t in range(turns):
            run_turn(graph, thread_id, human(t), mode="full")


def _count(db, thread_id: str) -> int:
    return int(execute(db, "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread_id,))[0][0])


def test_the_reader_sees_the_rows_as_they_were_whatever_the_session_writes_after(scratch_db):
    _full_thread(scratch_db, turns=2)
    stored = _count(scratch_db, "t")
    assert stored > 0
    with open_session(scratch_db) as session:
        with open_snapshot_reader(scratch_db, session) as reader:
            if scratch_db.backend == "sqlite":
                assert reader is session  # one writer: the session reads its own rows
            else:
                assert reader is not session and reader.conn is not session.conn
            session.execute("DELETE FROM checkpoints WHERE thread_id = ?", ["t"])
            seen = int(reader.query("SELECT COUNT(*) AS n FROM checkpoints WHERE thread_id = ?", ["t"])[0]["n"])
            assert seen == (0 if reader is session else stored)
            if reader is not session:
                with pytest.raises(StorageError):  # read only
                    reader.execute("DELETE FROM checkpoints WHERE thread_id = ?", ["t"])
        assert int(session.query("SELECT COUNT(*) AS n FROM checkpoints WHERE thread_id = ?",
                                 ["t"])[0]["n"]) == 0
    assert _count(scratch_db, "t") == stored  # rolled back


def test_the_backup_is_copied_on_its_own_thread_while_the_walk_reads_through_the_reader(scratch_db, monkeypatch):
    """Postgres: the backup's copy runs on another thread, on the write connection; every page of the walk is read
    on another connection. The backup holds the thread's rows byte for byte (the revert gives them back)."""
    _full_thread(scratch_db)
    before = raw_rows(scratch_db, "t")
    seen: dict[str, list] = {"backup": [], "pages": []}
    real_copy, real_page = backups.copy_to_backup, postgres_pages._page

    def copy(session, *args, **kwargs):
        seen["backup"].append((threading.current_thread() is threading.main_thread(), session.conn))
        return real_copy(session, *args, **kwargs)

    def page(cur, *args, **kwargs):
        seen["pages"].append(cur.connection)
        return real_page(cur, *args, **kwargs)

    monkeypatch.setattr(backups, "copy_to_backup", copy)
    monkeypatch.setattr(postgres_pages, "_page", page)
    report = compact_thread(scratch_db, "t", snapshot_frequency=3)
    assert report.status == "compacted", report.as_dict()
    assert len(seen["backup"]) == 1
    on_main, write_conn = seen["backup"][0]
    if scratch_db.backend == "postgres":
        assert not on_main
        walk_pages = seen["pages"][:len(seen["pages"]) // 2]  # the verification's read-back pages come after
        assert walk_pages and all(conn is not write_conn for conn in walk_pages)
        assert seen["pages"][-1] is write_conn  # the verification reads the written rows in the transaction
    else:
        assert on_main and seen["pages"] == []
    assert raw_rows(scratch_db, "t") != before
    assert revert_thread(scratch_db, report.backup_id).status == "reverted"
    assert raw_rows(scratch_db, "t") == before


def test_a_backup_that_fails_on_its_thread_fails_the_compaction_and_writes_nothing(scratch_db, monkeypatch):
    if scratch_db.backend != "postgres":
        pytest.skip("the backup runs on a thread of its own on Postgres only")
    _full_thread(scratch_db)
    before = raw_rows(scratch_db, "t")
    real_copy = backups.copy_to_backup

    def failing(session, *args, **kwargs):
        real_copy(session, *args, **kwargs)
        session.execute("SELECT 1 / 0")  # the server fails inside the backup, after its rows were copied

    monkeypatch.setattr(backups, "copy_to_backup", failing)
    with pytest.raises(StorageError):
        compact_thread(scratch_db, "t", snapshot_frequency=3)
    assert raw_rows(scratch_db, "t") == before and backup_ids(scratch_db) == []


def test_a_thread_without_full_rows_takes_no_backup_while_reading(scratch_db, monkeypatch):
    """A delta thread: nothing to rewrite, no backup started (not even one rolled back)."""
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, mode="delta", tool_every=2)
        for t in range(3):
            run_turn(graph, "d", human(t), mode="delta")
    calls: list[str] = []
    real = CompactionWriter.back_up_meanwhile
    monkeypatch.setattr(CompactionWriter, "back_up_meanwhile", lambda self, ns: (calls.append(ns), real(self, ns)))
    before = raw_rows(scratch_db, "d")
    report = compact_thread(scratch_db, "d", snapshot_frequency=10)
    assert report.status == "already_delta" and calls == []
    assert raw_rows(scratch_db, "d") == before and backup_ids(scratch_db) == []


@pytest.mark.parametrize("guess", ["exact", "missing_one", "one_too_many", "nothing"])
def test_the_backup_taken_meanwhile_moves_the_guessed_blobs_only_when_the_guess_is_exact(scratch_db, monkeypatch,
                                                                                       guess):
    """The backup taken while the walk reads moves the first namespace's blobs it guessed; a guess that is not
    the walk's exact set is rolled back to the savepoint and the backup taken again: either way one backup with
    every original row, the thread compacted, and the revert byte-identical."""
    if scratch_db.backend != "postgres":
        pytest.skip("the backup runs on a thread of its own on Postgres only (SQLite has no blob table)")
    _full_thread(scratch_db)
    before = raw_rows(scratch_db, "t")
    blobs = int(execute(scratch_db, "SELECT COUNT(*) FROM checkpoint_blobs WHERE thread_id = ? "
                        "AND channel = 'messages'", ("t",))[0][0])
    real_guess, real_copy = CompactionWriter._guess_versions, backups.copy_to_backup
    copies: list[tuple[bool, tuple | None]] = []

    def guessed(self, ns):
        exact = real_guess(self, ns)
        assert exact
        return {"exact": exact, "missing_one": exact[1:], "one_too_many": [*exact, "no-such-version"],
                "nothing": []}[guess]

    def copy(session, *args, **kwargs):
        copies.append((threading.current_thread() is threading.main_thread(), kwargs.get("move_messages")))
        return real_copy(session, *args, **kwargs)

    monkeypatch.setattr(CompactionWriter, "_guess_versions", guessed)
    monkeypatch.setattr(backups, "copy_to_backup", copy)
    report = compact_thread(scratch_db, "t", snapshot_frequency=3)
    assert report.status == "compacted", report.as_dict()
    assert copies[0][0] is False  # taken on the backup's own thread
    if guess == "exact":
        assert len(copies) == 1 and copies[0][1] is not None
    else:  # rolled back to the savepoint, then taken again on the walk's thread with the exact set
        assert len(copies) == 2 and copies[1][0] is True and copies[1][1] is not None
    assert backup_ids(scratch_db) == [report.backup_id]
    rows = execute(scratch_db, "SELECT checkpoint_rows, blob_rows FROM dfa_backups WHERE backup_id = ?",
                   (report.backup_id,))[0]
    assert rows[1] == blobs and int(execute(scratch_db, "SELECT COUNT(*) FROM dfa_backup_blobs WHERE backup_id = ?",
                                            (report.backup_id,))[0][0]) == blobs
    assert revert_thread(scratch_db, report.backup_id).status == "reverted"
    assert raw_rows(scratch_db, "t") == before


def test_the_put_depth_changes_when_the_client_waits_not_what_is_stored(scratch_db, monkeypatch):
    """The same thread compacted with the server awaited after every put and after every 512: the same rows."""
    from deerflow.convert.pipelined import PipelinedPuts

    with pytest.raises(ValueError, match="depth must be at least 1"):
        PipelinedPuts(None, depth=0)  # type: ignore[arg-type]
    _full_thread(scratch_db)
    before = raw_rows(scratch_db, "t")
    stored = []
    for depth in (1, CompactionWriter.PUT_DEPTH):
        monkeypatch.setattr(CompactionWriter, "PUT_DEPTH", depth)
        report = compact_thread(scratch_db, "t", snapshot_frequency=3)
        assert report.status == "compacted", report.as_dict()
        stored.append(raw_rows(scratch_db, "t"))
        assert revert_thread(scratch_db, report.backup_id).status == "reverted"
        assert raw_rows(scratch_db, "t") == before
    assert stored[0] == stored[1] != before
