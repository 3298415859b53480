"""A saver without SQL tables is a capability (``deerflow.storage.has_sql_tables``), not an ``except TypeError``:
the memory saver gets "no data" from every SQL-backed view, and a real ``TypeError`` on a SQL saver is not
swallowed as "no data"."""

from __future__ import annotations

import sqlite3

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from dashboard.threads import services, storage
from deerflow.config.database_config import DatabaseConfig

THREAD = "memory-thread"


@pytest.fixture
def memory_rt(runtime_for):
    rt = runtime_for(DatabaseConfig(backend="memory"), "full")
    checkpoint = empty_checkpoint()
    rt.saver.put({"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}, checkpoint,
                 {"source": "input", "step": -1}, {})
    return rt


def test_the_memory_saver_has_no_sql_backed_views(memory_rt):
    assert storage.freshness(memory_rt) is None
    assert storage.refresh_inventory(memory_rt).kind == "unavailable"
    assert storage.storage_chart(memory_rt, THREAD) is None
    assert storage.storage_totals(memory_rt) == {}
    assert storage.forget_vanished(memory_rt, THREAD) is False
    assert services.thread_namespaces(memory_rt, THREAD) == []
    assert services.page_namespaces(memory_rt, THREAD) == []
    assert services.thread_cadence(memory_rt, THREAD) is None


def test_the_memory_saver_finds_threads_through_the_saver(memory_rt):
    assert services._thread_exists(memory_rt, THREAD) is True
    assert services._thread_exists(memory_rt, "no-such-thread") is False


def test_a_type_error_on_a_sql_saver_is_a_bug_not_no_data(runtime_for, sqlite_fixture_db_rw, monkeypatch):
    """Before, ``except TypeError`` turned any ``TypeError`` raised while charting into "no chart"."""
    from deerflow import inventory

    rt = runtime_for(sqlite_fixture_db_rw, "delta")
    assert isinstance(rt.saver.conn, sqlite3.Connection)
    with rt.saver.lock:
        thread_id = rt.saver.conn.execute("SELECT thread_id FROM checkpoints ORDER BY thread_id LIMIT 1").fetchone()[0]
    assert storage.storage_totals(rt) != {}
    assert storage.storage_chart(rt, thread_id) is not None  # the real chart of a stored thread

    def broken(*args, **kwargs):
        raise TypeError("a bug in the chart query")

    monkeypatch.setattr(inventory, "checkpoint_bytes", broken)
    with pytest.raises(TypeError, match="a bug in the chart query"):
        storage.storage_chart(rt, thread_id)
