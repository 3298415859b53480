"""Keyset pages over the summary: every sort and filter, and a walk that races concurrent writers.

The law (:func:`deerflow.inventory.list_threads`): a walk returns every
thread whose sort key does not change meanwhile exactly once and never a
thread twice; keys only grow, so a thread updated during the walk moves
behind the cursor.
"""

from __future__ import annotations

import threading

import pytest

from deerflow import inventory
from deerflow.storage.savers import open_checkpointer
from tests.backends import BACKENDS
from tests.scale.conftest import walk
from tests.scale.test_summary import _run_turns

SORT_KEYS = {
    "updated": lambda s: (s.last_checkpoint_id, s.thread_id),
    "checkpoints": lambda s: (s.checkpoint_count, s.thread_id),
    "bytes": lambda s: (s.bytes_total, s.thread_id),
}


def _matches(s: inventory.ThreadSummary, filters: dict) -> bool:
    return all((v in s.thread_id) if k == "q" else getattr(s, k) == v for k, v in filters.items())


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_sort_and_filter_pages_in_the_documented_order(seeded, backend):
    database, _ = seeded(backend, threads=70, mode="mixed")
    with open_checkpointer(database) as saver:
        everything = walk(saver, limit=1000)
        assert len(everything) == 70
        for sort, key in SORT_KEYS.items():
            for filters in ({}, {"mode": "delta"}, {"mode": "full"}, {"thread_class": "migrated"},
                            {"thread_class": "delta", "q": "a"}):
                expected = sorted((s for s in everything if _matches(s, filters)), key=key, reverse=True)
                got = walk(saver, limit=6, sort=sort, **filters)
                assert [s.thread_id for s in got] == [s.thread_id for s in expected], (sort, filters)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cursors_belong_to_their_sort(seeded, backend):
    database, _ = seeded(backend, threads=12, mode="delta")
    with open_checkpointer(database) as saver:
        _, by_bytes = inventory.list_threads(saver, limit=3, sort="bytes")
        _, by_update = inventory.list_threads(saver, limit=3)
        with pytest.raises(inventory.InvalidCursorError):
            inventory.list_threads(saver, limit=3, sort="checkpoints", cursor=by_bytes)
        with pytest.raises(inventory.InvalidCursorError):
            inventory.list_threads(saver, limit=3, sort="bytes", cursor=by_update)
        with pytest.raises(ValueError, match="sort must be one of updated, checkpoints, bytes; got 'size'"):
            inventory.list_threads(saver, sort="size")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sort", ["updated", "checkpoints"])
def test_a_walk_racing_writers_sees_each_thread_once(seeded, backend, sort):
    database, _ = seeded(backend, threads=90, mode="delta")
    with open_checkpointer(database) as saver:
        initial = {s.thread_id: SORT_KEYS[sort](s) for s in walk(saver, limit=1000)}
        visited: list[str] = []
        stop = threading.Event()
        written: list[str] = []

        def writer() -> None:
            # New threads, and more turns on threads the walk has already passed.
            with open_checkpointer(database) as other:
                n = 0
                while not stop.is_set() and n < 12:
                    _run_turns(other, f"racer-{n}", 1)
                    written.append(f"racer-{n}")
                    if visited:
                        _run_turns(other, visited[0], 1)
                    n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            cursor = None
            while True:
                page, cursor = inventory.list_threads(saver, limit=7, cursor=cursor, sort=sort)
                visited += [s.thread_id for s in page]
                if cursor is None:
                    break
        finally:
            stop.set()
            thread.join()
        assert len(visited) == len(set(visited)), "a thread was listed twice"
        assert set(initial) <= set(visited), set(initial) - set(visited)
        assert set(visited) - set(initial) <= set(written)
