"""``deerflow.inventory.summary``: the stored rows equal the naive per-request aggregate, before and after changes.

The oracle is :func:`benchmarks.naive_list.list_threads_naive` (``GROUP BY
thread_id`` over every checkpoint, classified in Python), an independent
code path from the summary's SQL. Checked on the real fixture and on seeded
data, after incremental refreshes (new checkpoints on old threads, new
threads), late commits (the lag window), rewrites that keep ids (conversion,
deletion), and for the census.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3

import psycopg
import pytest

from deerflow import inventory
from deerflow.convert import convert_thread
from deerflow.inventory import summary
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from deerflow.seed.load import CloneSpec, PostgresBatch, PreparedTemplate, SqliteBatch
from deerflow.seed.script import ScriptedAgent, plan_turns
from deerflow.seed.template import record_template
from deerflow.storage import reader_for
from deerflow.storage.savers import open_checkpointer
from tests.backends import BACKENDS
from tests.scale.conftest import naive_all, summary_facts, walk


def _assert_matches_naive(saver) -> list[inventory.ThreadSummary]:
    listed = walk(saver, limit=7)
    assert [summary_facts(s) for s in listed] == [summary_facts(s) for s in naive_all(saver)]
    return listed


def _run_turns(saver, thread_id: str, turns: int, mode: str = "delta") -> None:
    """Real turns of the scripted agent on ``thread_id`` (new checkpoints with current ids)."""
    rng = random.Random(thread_id)
    agent = ScriptedAgent(mode, 3, saver, plan_turns(rng, turns, long_output_rate=0), rng)
    for t in range(turns):
        agent.turn = t
        agent.graph.invoke({"messages": [agent.human()]}, inject_checkpoint_mode(
            {"configurable": {"thread_id": thread_id}}, mode))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fixture_summary_equals_the_naive_aggregate(backend, request):
    database = request.getfixturevalue(f"{backend}_fixture_db_rw")
    with open_checkpointer(database) as saver:
        listed = _assert_matches_naive(saver)
        assert len(listed) == 27
        assert inventory.class_counts(saver) == {
            c: sum(1 for s in listed if s.thread_class == c) for c in inventory.THREAD_CLASSES}
        for s in listed:
            assert s == inventory.get_thread_summary(saver, s.thread_id)  # stored row == live row, storage included


@pytest.mark.parametrize("backend", BACKENDS)
def test_stored_bytes_are_the_summarys_totals_and_leave_unknown_threads_out(backend, request):
    database = request.getfixturevalue(f"{backend}_fixture_db_rw")
    with open_checkpointer(database) as saver:
        assert inventory.stored_bytes(saver, ["delta-f10-9t"]) == {}  # no summary built yet: nothing known
        listed = _assert_matches_naive(saver)  # builds it
        ids = [s.thread_id for s in listed]
        sizes = inventory.stored_bytes(saver, [*ids, ids[0], "no-such-thread"])
        assert sizes == {s.thread_id: s.bytes_total for s in listed} and all(n > 0 for n in sizes.values())
        assert inventory.stored_bytes(saver, []) == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_incremental_refresh_after_new_checkpoints_and_new_threads(seeded, backend):
    database, report = seeded(backend, threads=80, mode="mixed")
    with open_checkpointer(database) as saver:
        before = _assert_matches_naive(saver)
        touched = [s.thread_id for s in before if s.mode == "delta"][:3] + ["brand-new-1", "brand-new-2"]
        for tid in touched:
            _run_turns(saver, tid, 2)
        fresh = summary.freshness(saver)
        assert 0 < fresh.pending <= 2000
        result = summary.refresh(saver)
        assert result.kind == "incremental" and result.threads == len(touched)
        after = _assert_matches_naive(saver)
        assert len(after) == 82
        assert {s.thread_id for s in after[:5]} == set(touched)  # newest update first
        assert summary.freshness(saver).pending == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_requests_refresh_inline_when_cheap(seeded, backend):
    database, _ = seeded(backend, threads=30, mode="delta")
    with open_checkpointer(database) as saver:
        _assert_matches_naive(saver)
        _run_turns(saver, "inline", 1)
        page, _ = inventory.list_threads(saver, limit=1)  # ensure_fresh ran inside
        assert page[0].thread_id == "inline"
        assert summary.freshness(saver).pending == 0
        # Over budget: served as is, left to the periodic refresh.
        _run_turns(saver, "later", 2)
        fresh = summary.ensure_fresh(saver, budget=1)
        assert not fresh.refreshed and fresh.pending == 2
        assert "later" not in {s.thread_id for s in walk(saver, refresh=False)}
        assert summary.ensure_fresh(saver).refreshed


def _late_thread(backend: str, database, saver, thread_id: str, minutes_ago: float) -> None:
    """A thread whose ids are older than the watermark: a writer that committed late."""
    template = record_template(key="late", kind="delta", dialect=backend, turns=2, snapshot_frequency=3, seed="late",
                               postgres_url=database.postgres_url)
    start = int((dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)).timestamp() * 1_000_000)
    batch = PostgresBatch() if backend == "postgres" else SqliteBatch()
    batch.add(PreparedTemplate(template), CloneSpec(thread_id, 2, start, 5_000_000), random.Random(3))
    if backend == "postgres":
        with psycopg.connect(database.postgres_url) as conn:
            batch.copy_into(conn)
    else:
        with sqlite3.connect(str(database.sqlite_path())) as conn:
            batch.insert_into(conn)


@pytest.mark.parametrize("backend", BACKENDS)
def test_late_commits_are_caught_by_the_lag_window_or_the_reconcile(seeded, backend):
    database, _ = seeded(backend, threads=20, mode="delta")
    with open_checkpointer(database) as saver:
        _run_turns(saver, "now", 1)
        summary.refresh(saver)  # watermark = now
        _late_thread(backend, database, saver, "late-1m", 1)
        _late_thread(backend, database, saver, "late-1h", 60)
        assert summary.refresh(saver).threads == 0  # ids below the watermark: invisible without lag
        assert summary.refresh(saver, lag_s=300).threads >= 1
        ids = {s.thread_id for s in walk(saver, refresh=False)}
        assert "late-1m" in ids and "late-1h" not in ids
        assert summary.refresh(saver, full=True).kind == "full"
        _assert_matches_naive(saver)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rewrites_that_keep_ids_conversion_and_deletion(seeded, backend):
    database, _ = seeded(backend, threads=30, mode="delta")
    with open_checkpointer(database) as saver:
        rows = _assert_matches_naive(saver)
        victim, gone = rows[0].thread_id, rows[1].thread_id
        assert rows[0].mode == "delta"
        assert convert_thread(database, victim).status == "converted"  # same ids, new metadata
        saver.delete_thread(gone)
        page = {s.thread_id: s for s in walk(saver)}  # the backups check recomputes the converted thread
        assert page[victim].mode == "full" and page[victim].thread_class == "full"
        assert gone in page  # a deletion needs the reconcile (or a thread page view)
        summary.refresh_threads(saver, [gone])
        assert gone not in {s.thread_id for s in walk(saver)}
        _assert_matches_naive(saver)


@pytest.mark.parametrize("backend", BACKENDS)
def test_full_reconcile_drops_vanished_threads_and_equals_naive(seeded, backend):
    database, _ = seeded(backend, threads=25, mode="mixed")
    with open_checkpointer(database) as saver:
        rows = _assert_matches_naive(saver)
        for s in rows[:4]:
            saver.delete_thread(s.thread_id)
        result = summary.refresh(saver, full=True)
        assert result.kind == "full" and result.threads == 21
        assert len(_assert_matches_naive(saver)) == 21


def test_migrations_are_idempotent_and_recorded(sqlite_fixture_db_rw):
    with open_checkpointer(sqlite_fixture_db_rw) as saver:
        summary.ensure_schema(saver)
        summary.refresh(saver)
        reader = reader_for(saver)
        versions = [r["v"] for r in reader.query("SELECT v FROM dfa_summary_migrations ORDER BY v")]
        assert versions == list(range(len(summary.MIGRATIONS["sqlite"])))
    with open_checkpointer(sqlite_fixture_db_rw) as saver:  # a second process
        summary.ensure_schema(saver)
        assert summary.refresh(saver).kind == "incremental"
        indexes = {r["name"] for r in reader_for(saver).query(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'dfa_%'")}
        assert "dfa_checkpoints_checkpoint_id_idx" in indexes and "dfa_ts_bytes_idx" in indexes


@pytest.mark.postgres
def test_a_role_with_select_on_the_summary_reads_it_without_refreshing(postgres_fixture_db_rw):
    import uuid

    from deerflow.config.database_config import DatabaseConfig
    from tests import fixtures_real

    with open_checkpointer(postgres_fixture_db_rw) as saver:
        expected = _assert_matches_naive(saver)
    role = f"dfa_reader_{uuid.uuid4().hex[:8]}"
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_fixture_db_rw.postgres_url)["dbname"]
    with psycopg.connect(postgres_fixture_db_rw.postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        conn.execute(f'GRANT SELECT ON checkpoints, checkpoint_blobs, checkpoint_writes, dfa_thread_summary, '
                     f'dfa_summary_state, dfa_summary_migrations TO "{role}"')
    try:
        reader_db = DatabaseConfig(backend="postgres", postgres_url=f"postgresql://{role}@127.0.0.1:5432/{dbname}")
        with open_checkpointer(reader_db) as saver:
            assert summary.access(saver) == "read"
            assert [summary_facts(s) for s in walk(saver)] == [summary_facts(s) for s in expected]
    finally:
        with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
        with psycopg.connect(postgres_fixture_db_rw.postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def _checkpoints(saver) -> int:
    return int(reader_for(saver).query("SELECT COUNT(*) AS n FROM checkpoints")[0]["n"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_seeding_into_a_built_summary_summarizes_exactly_the_seeded_threads(seeded, backend):
    from deerflow.seed import SeedPlan, seed_threads

    database, _ = seeded(backend, threads=20, mode="delta")
    with open_checkpointer(database) as saver:
        _run_turns(saver, "newest", 1)  # the watermark moves past every seeded id
        summary.refresh(saver)
        mark = summary.freshness(saver).watermark
        report = seed_threads(database, SeedPlan(threads=7, turns_min=1, turns_max=3, mode="mixed", seed="more",
                                                 templates=4, batch_threads=3))  # 3 batches
        assert report.summarized == 7 and report.summary_seconds > 0
        new = {s.thread_id for s in report.samples}
        assert len(new) == 7
        top = reader_for(saver).query(
            f"SELECT MAX(checkpoint_id) AS m FROM checkpoints WHERE thread_id IN ({', '.join('?' * 7)})", list(new))
        assert top[0]["m"] < mark  # below the watermark: a watermark refresh would never see them
        assert summary.refresh(saver).threads == 0
        listed = _assert_matches_naive(saver)
        assert len(listed) == 28 and new <= {s.thread_id for s in listed}
        assert summary.refresh(saver, verify_s=0).missing == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_count_check_finds_rows_written_below_the_watermark(seeded, backend):
    from deerflow.seed import SeedPlan, seed_threads

    database, _ = seeded(backend, threads=15, mode="mixed")
    with open_checkpointer(database) as saver:
        _run_turns(saver, "newest", 1)
        assert summary.refresh(saver, verify_s=0).kind == "full"  # the first build: nothing to compare yet
        assert summary.refresh(saver, verify_s=0).missing == 0 and summary.freshness(saver).complete
        report = seed_threads(database, SeedPlan(threads=4, turns_min=1, turns_max=3, mode="delta", seed="hidden",
                                                 templates=2), summarize=False)  # e.g. a restore or a backfill
        assert report.summarized == 0
        hidden = {s.thread_id for s in report.samples}
        assert summary.freshness(saver).missing == 0  # nothing checked yet: the stored answer
        plain = summary.refresh(saver, lag_s=120)
        assert plain.kind == "incremental" and plain.missing is None  # no check asked for
        assert not hidden & {s.thread_id for s in walk(saver)}
        checked = summary.refresh(saver, verify_s=300)  # the last check is older than 0 s but not 300 s
        assert checked.missing is None
        checked = summary.refresh(saver, verify_s=0)
        assert checked.kind == "incremental" and checked.missing == report.checkpoints
        fresh = summary.freshness(saver)
        assert fresh.missing == report.checkpoints and not fresh.complete and fresh.verified_at
        assert summary.refresh(saver).missing is None and summary.freshness(saver).missing == report.checkpoints
        rebuilt = summary.refresh(saver, verify_s=0, rebuild_missing=True)
        assert (rebuilt.kind, rebuilt.threads, rebuilt.missing) == ("full", 20, report.checkpoints)
        assert summary.freshness(saver).missing == 0
        assert hidden <= {s.thread_id for s in _assert_matches_naive(saver)}
        assert summary.refresh(saver, verify_s=0).missing == 0
        assert _checkpoints(saver) == sum(s.checkpoint_count for s in walk(saver))
