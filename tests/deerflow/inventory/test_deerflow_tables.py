"""DeerFlow's ``threads_meta`` and ``runs`` read beside the real fixture, on both backends, and their absence."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from deerflow import inventory
from deerflow.config.database_config import DatabaseConfig
from deerflow.inventory import count_threads
from deerflow.inventory import deerflow_tables as dft
from deerflow.storage import open_checkpointer, reader_for
from tests import fixtures_real
from tests.backends import BACKENDS
from tests.deerflow_schema import (
    FIXTURE_META,
    GONE_THREAD,
    create_deerflow_tables,
    deerflow_connection,
    insert_thread_meta,
    stand_beside_fixture,
)

FIXTURE_THREADS = {t["thread_id"] for t in fixtures_real.load_manifest()["threads"]}
#: The fixture's threads without a DeerFlow row: orphans (the fixture is days old).
ORPHANS = FIXTURE_THREADS - set(FIXTURE_META)


@pytest.fixture(params=BACKENDS)
def bare(request: pytest.FixtureRequest) -> DatabaseConfig:
    """A writable copy of the real fixture on each backend, without DeerFlow's tables."""
    return request.getfixturevalue(f"{request.param}_fixture_db_rw")


@pytest.fixture
def beside(bare: DatabaseConfig) -> tuple[DatabaseConfig, dict[str, str]]:
    """The fixture copy with DeerFlow's tables and rows (:func:`tests.deerflow_schema.stand_beside_fixture`)."""
    return bare, stand_beside_fixture(bare)


def _all(saver, **filters) -> list[inventory.ThreadSummary]:
    page, cursor = inventory.list_threads(saver, limit=1000, **filters)
    assert cursor is None
    return page


@pytest.mark.parametrize("summary", [True, False], ids=["summary", "live"])
def test_it_lists_titles_owners_and_filters(beside, summary, monkeypatch):
    database, _ = beside
    if not summary:  # a role that cannot use the thread summary: the live aggregate answers the same
        monkeypatch.setattr(inventory.summary, "readable", lambda saver, refresh=True: False)
    with open_checkpointer(database) as saver:
        rows = {t.thread_id: t for t in _all(saver)}
        assert set(rows) == FIXTURE_THREADS
        assert rows["full-short-3t"].title == FIXTURE_META["full-short-3t"]["display_name"]
        assert (rows["full-short-3t"].owner, rows["full-short-3t"].deerflow_thread) == ("alice", True)
        assert (rows["full-empty"].title, rows["full-empty"].owner) == (None, "alice")
        assert (rows["delta-f3-40t"].title, rows["delta-f3-40t"].owner, rows["delta-f3-40t"].deerflow_thread) == (
            None, None, False)
        assert {t.thread_id for t in _all(saver, owner="alice")} == {"full-short-3t", "full-empty"}
        assert {t.thread_id for t in _all(saver, owner="bob")} == {"delta-f10-fork"}
        assert _all(saver, owner="nobody") == []
        assert {t.thread_id for t in _all(saver, q="sourdough guide")} == {"delta-f10-fork"}  # title, any case
        assert {t.thread_id for t in _all(saver, q="fork")} == {t for t in FIXTURE_THREADS if "fork" in t}
        assert {t.thread_id for t in _all(saver, q="<script>")} == {"full-short-3t"}
        assert {t.thread_id for t in _all(saver, thread_class="orphaned")} == ORPHANS
        assert {t.thread_id for t in _all(saver, thread_class="orphaned", mode="full")} == {
            t for t, s in rows.items() if t in ORPHANS and s.mode == "full"}
        assert _all(saver, thread_class="orphaned", orphan_min_idle_s=10**10) == []  # none idle for 300 years
        for filters in ({"owner": "alice"}, {"q": "sourdough"}, {"thread_class": "orphaned"}, {}):
            assert count_threads(saver, **filters) == len(_all(saver, **filters)), filters


def test_it_pages_a_filtered_list_by_keyset(beside):
    database, _ = beside
    with open_checkpointer(database) as saver:
        seen, cursor = [], None
        while True:
            page, cursor = inventory.list_threads(saver, limit=5, cursor=cursor, thread_class="orphaned")
            seen += [t.thread_id for t in page]
            if cursor is None:
                break
    assert sorted(seen) == sorted(ORPHANS) and len(seen) == len(set(seen))


def test_it_counts_orphans_and_their_bytes_and_rows_without_checkpoints(beside):
    database, _ = beside
    with open_checkpointer(database) as saver:
        reader = reader_for(saver)
        rows = {t.thread_id: t for t in _all(saver)}
        floor = dft.orphan_floor(dft.DEFAULT_ORPHAN_MIN_IDLE_S)
        totals = dft.orphan_totals(reader, floor)
        live = dft.orphan_totals(reader, floor, summary=False)
        assert sorted(dft.orphaned_thread_ids(reader, floor)) == sorted(ORPHANS)
        count, gone = dft.metadata_without_checkpoints(reader)
        assert dft.metadata_without_checkpoints(reader, summary=True) == (count, gone)
    expected = sum(rows[t].bytes_total for t in ORPHANS)
    assert totals is not None and totals.threads == len(ORPHANS) and totals.bytes_total == expected > 0
    assert totals.checkpoints == sum(rows[t].checkpoint_count for t in ORPHANS)
    assert live == totals
    assert count == 1 and [(m.thread_id, m.owner, m.title) for m in gone] == [(GONE_THREAD, "carol", "History deleted")]


def test_it_reads_runs_in_flight_first_then_newest(beside):
    database, runs = beside
    with open_checkpointer(database) as saver:
        facts = dft.thread_facts(reader_for(saver), "delta-f10-fork")
        quiet = dft.thread_facts(reader_for(saver), "delta-f3-40t")
    assert facts.deerflow_thread is True and facts.meta is not None and facts.meta.status == "running"
    assert facts.run_count == 2 and [r.run_id for r in facts.runs] == [runs["pending"], runs["done"]]
    assert facts.in_flight is not None and facts.in_flight.operation_kind == "checkpoint_write"
    done = facts.runs[1]
    assert (done.status, done.model_name, done.input_tokens, done.output_tokens, done.total_tokens,
            done.message_count, done.stop_reason) == ("success", "gpt-<b>4o</b>", 1200, 345, 1545, 12, "end_turn")
    assert done.created_at == dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
    assert facts.as_json() == {"title": "Sourdough GUIDE & starter", "owner": "bob", "deerflow_thread": True}
    assert quiet.deerflow_thread is False and quiet.runs == () and quiet.in_flight is None
    assert quiet.as_json() == {"title": None, "owner": None, "deerflow_thread": False}


def test_a_database_without_deerflow_tables_lists_as_before(bare):
    with open_checkpointer(bare) as saver:
        reader = reader_for(saver)
        rows = _all(saver)
        assert dft.presence(reader) == dft.ABSENT
        assert {t.thread_id for t in rows} == FIXTURE_THREADS
        assert all(t.title is None and t.owner is None and t.deerflow_thread is None for t in rows)
        assert _all(saver, owner="alice") == [] and _all(saver, thread_class="orphaned") == []
        assert {t.thread_id for t in _all(saver, q="fork")} == {t for t in FIXTURE_THREADS if "fork" in t}
        assert dft.orphan_totals(reader, dft.orphan_floor(0)) is None
        assert dft.orphaned_thread_ids(reader, dft.orphan_floor(0)) == []
        assert dft.metadata_without_checkpoints(reader) == (0, [])
        assert dft.thread_facts(reader, "full-short-3t").as_json() == {
            "title": None, "owner": None, "deerflow_thread": None}


def test_an_older_deerflow_without_newer_columns_reads_them_as_none(bare):
    create_deerflow_tables(bare)
    insert_thread_meta(bare, "full-short-3t", user_id="alice", display_name="Old")
    sqlite = bare.backend == "sqlite"  # SQLite keeps any value in any column: a text count, a bad time
    count, created = ("'x'", "'not a time'") if sqlite else ("7", "'2026-11-29 12:00:00+00'")
    with deerflow_connection(bare) as conn:
        conn.execute("DROP INDEX uq_runs_thread_active")
        conn.execute("ALTER TABLE runs DROP COLUMN stop_reason")
        conn.execute("ALTER TABLE runs DROP COLUMN operation_kind")
        conn.execute("INSERT INTO runs (run_id, thread_id, status, multitask_strategy, metadata_json, kwargs_json, "
                     "message_count, total_input_tokens, total_output_tokens, total_tokens, llm_call_count, "
                     "lead_agent_tokens, subagent_tokens, middleware_tokens, created_at, updated_at) VALUES "
                     f"('r1', 'full-short-3t', 'error', 'reject', '{{}}', '{{}}', {count}, 1, 2, 3, 0, 0, 0, 0, "
                     f"{created}, '2026-11-30 12:00:00+00:00')")
    with open_checkpointer(bare) as saver:
        facts = dft.thread_facts(reader_for(saver), "full-short-3t")
    (run,) = facts.runs
    assert (run.status, run.operation_kind, run.stop_reason, run.message_count, run.total_tokens) == (
        "error", None, None, None if sqlite else 7, 3)
    assert run.created_at == (None if sqlite else dt.datetime(2026, 11, 29, 12, tzinfo=dt.UTC))
    assert run.updated_at == dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


@pytest.mark.parametrize("owner", ["", "x" * 65, "a\x00b", "tab\there"])
def test_bad_owner_values_are_refused(owner):
    with pytest.raises(ValueError, match="owner"):
        dft.validate_owner(owner)
    with pytest.raises(ValueError, match="owner"):
        inventory.validate_list_args(50, None, None, "updated", owner)


def test_orphan_floor_sorts_with_checkpoint_ids():
    now = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    floor = dft.orphan_floor(86_400, now)
    from deerflow.storage import checkpoint_time

    assert floor is not None and checkpoint_time(floor) == now - dt.timedelta(days=1)
    assert dft.orphan_floor(10**15, now) is None
    with pytest.raises(ValueError):
        dft.orphan_floor(-1, now)


@pytest.mark.postgres
def test_it_finds_the_tables_on_the_postgres_schema_search_path(tmp_path: Path):
    name, url = fixtures_real.create_database("dfa_dftables")
    try:
        in_schema = DatabaseConfig(backend="postgres", postgres_url=url, postgres_schema="deer")
        public = DatabaseConfig(backend="postgres", postgres_url=url)
        create_deerflow_tables(in_schema)
        with open_checkpointer(in_schema, create=True) as saver:
            assert dft.presence(reader_for(saver)).has_threads_meta
            assert dft.presence(reader_for(saver)).has_runs
        with open_checkpointer(public, create=True) as saver:  # public has no DeerFlow tables
            assert dft.presence(reader_for(saver)) == dft.ABSENT
    finally:
        fixtures_real.drop_database(name)


@pytest.mark.postgres
def test_a_role_that_may_not_read_deerflows_tables_lists_as_without_them(postgres_fixture_db_rw):
    import uuid

    import psycopg

    stand_beside_fixture(postgres_fixture_db_rw)
    with open_checkpointer(postgres_fixture_db_rw) as saver:
        inventory.list_threads(saver, limit=1)  # the summary is built by the owner
    role = f"dfa_reader_{uuid.uuid4().hex[:8]}"
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_fixture_db_rw.postgres_url)["dbname"]
    with psycopg.connect(postgres_fixture_db_rw.postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT SELECT ON checkpoints, checkpoint_blobs, checkpoint_writes, dfa_thread_summary, '
                     f'dfa_summary_state, dfa_summary_migrations TO "{role}"')
    try:
        reader_db = DatabaseConfig(backend="postgres", postgres_url=f"postgresql://{role}@127.0.0.1:5432/{dbname}")
        with open_checkpointer(reader_db) as saver:
            assert dft.presence(reader_for(saver)) == dft.ABSENT
            rows = _all(saver)
        assert {t.thread_id for t in rows} == FIXTURE_THREADS
        assert all(t.deerflow_thread is None for t in rows)
    finally:
        with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
        with psycopg.connect(postgres_fixture_db_rw.postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')
