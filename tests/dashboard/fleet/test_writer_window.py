"""The audit's recent-writes window from the summary's write facts equals the scan of ``checkpoints``.

:func:`deerflow.inventory.census.recent_writer_facts` reads ``dfa_thread_writes`` and
``dfa_thread_write_snapshots`` (:mod:`deerflow.inventory.summary.writes`) for the buckets
after the window's first one and scans only that first bucket. Every
comparison below is against the same function with ``use_summary=False`` (the
scan the audit did before), on both backends: the real fixture, threads
written here with LangGraph, more writes after the first read, and threads
deleted and rewritten under ids the watermark cannot see.
"""

from __future__ import annotations

import datetime as dt

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.inventory import census, summary
from deerflow.inventory.summary.writes import BUCKET_CHARS, bucket_bounds, id_floor
from deerflow.storage.savers import open_checkpointer
from tests.dashboard.fleet.writes import write_turns

BEFORE_EVERYTHING = "00000000-0000-6000-8000-000000000000"


def _both(saver, since: str, **kwargs) -> tuple[census.WriterFacts, census.WriterFacts]:
    fast = census.recent_writer_facts(saver, since, **kwargs)
    slow = census.recent_writer_facts(saver, since, use_summary=False, **kwargs)
    assert (fast.source, slow.source) == ("summary", "scan")
    assert fast.as_of is not None and slow.as_of is None
    return fast, slow


def _windows(ids: list[str]) -> list[str]:
    """Window starts: before everything, inside and at the floor of several buckets, at the newest id."""
    ids = sorted(ids)
    picks = [BEFORE_EVERYTHING, ids[0], ids[len(ids) // 3], ids[len(ids) // 2], ids[-10], ids[-2], ids[-1]]
    floors = [i[:BUCKET_CHARS] + "0" * (8 - BUCKET_CHARS) + "-0000-0000-0000-000000000000" for i in picks[1:4]]
    return picks + floors


def _ids(saver) -> list[str]:
    from deerflow.inventory.listing import reader_for

    return [r["checkpoint_id"] for r in reader_for(saver).query("SELECT checkpoint_id FROM checkpoints")]


def test_bucket_bounds():
    assert bucket_bounds("1ef2abc5-0000-6000-8000-000000000000") == ("1ef2abc", "1ef2abd0-0000-0000-0000-000000000000")
    assert bucket_bounds("1ef2abcf-ffff-6fff-bfff-ffffffffffff") == ("1ef2abc", "1ef2abd0-0000-0000-0000-000000000000")
    assert bucket_bounds(BEFORE_EVERYTHING) == ("0000000", "00000010-0000-0000-0000-000000000000")
    assert bucket_bounds("not-a-uuid") is None and bucket_bounds("1EF2ABC5-0000") is None


@pytest.fixture
def fixture_saver(fixture_backend):
    _backend, database = fixture_backend
    with open_checkpointer(database) as saver:
        yield saver


def test_the_fixture_window_equals_the_scan(fixture_saver):
    saver = fixture_saver
    ids = _ids(saver)
    for since in _windows(ids):
        for bound in (census.DEFAULT_MAX_SUPERSTEPS, 1):
            fast, slow = _both(saver, since, max_supersteps=bound)
            assert fast.as_dict() == slow.as_dict(), (since, bound)
    whole, _ = _both(saver, BEFORE_EVERYTHING)
    assert whole.checkpoints == len(ids) and whole.counters_only == 49
    assert set(whole.cadences) == {3, 10, 100}
    assert _both(saver, max(ids))[0].checkpoints == 0


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)])
def writable(request, tmp_path) -> DatabaseConfig:
    if request.param == "sqlite":
        return DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "written"))
    return request.getfixturevalue("empty_postgres_db")


def _check(database: DatabaseConfig, *, extra: list[str] = ()) -> census.WriterFacts:
    """Compare both readings over the usual windows (and ``extra``); return the whole-window facts."""
    with open_checkpointer(database) as saver:
        ids = _ids(saver)
        day = id_floor(dt.datetime.now(dt.UTC) - dt.timedelta(hours=24))
        for since in [*_windows(ids), day, *extra]:
            fast, slow = _both(saver, since)
            assert fast.as_dict() == slow.as_dict(), since
        return _both(saver, BEFORE_EVERYTHING)[0]


def test_written_threads_and_later_writes_equal_the_scan(writable):
    write_turns(writable, "steady", 9, snapshot_frequency=4)
    first = _check(writable)
    assert first.threads == 1 and set(first.cadences) == {4} and first.counters_only == 0
    # More writes after the first read: another cadence on the same thread, a marker-less writer,
    # a full-mode write onto a delta thread; the next read refreshes the summary first.
    later = write_turns(writable, "steady", 6, snapshot_frequency=9, start=9)
    write_turns(writable, "plain-langgraph", 7, snapshot_frequency=5, marker=False)
    write_turns(writable, "flipped", 3, snapshot_frequency=10)
    write_turns(writable, "flipped", 1, mode="full", start=50)
    second = _check(writable, extra=[later[0]])
    assert second.threads == 3 and set(second.cadences) == {4, 5, 9}
    assert second.checkpoints > first.checkpoints and second.counters_only > 0
    assert second.plain == second.checkpoints - second.delta_marked - second.counters_only


def test_deleted_and_recomputed_threads_equal_the_scan(writable):
    write_turns(writable, "kept", 5, snapshot_frequency=3)
    write_turns(writable, "gone", 5, snapshot_frequency=4)
    assert set(_check(writable).cadences) == {3, 4}
    with open_checkpointer(writable) as saver:
        saver.delete_thread("gone")  # no new ids: the watermark cannot see it
        stale, scan = _both(saver, BEFORE_EVERYTHING)
        assert (stale.threads, scan.threads) == (2, 1)  # as of the last refresh, as the page says
        summary.refresh_threads(saver, ["gone"])  # what a thread page view or a job does
    after = _check(writable)
    assert after.threads == 1 and set(after.cadences) == {3}
    write_turns(writable, "gone", 4, snapshot_frequency=7)  # the id comes back with new checkpoints
    with open_checkpointer(writable) as saver:
        summary.refresh(saver, full=True)
    again = _check(writable)
    assert set(again.cadences) == {3, 7} and again.threads == 2
