"""``deerflow.seed``: the rows it writes are the rows LangGraph writes, read back through LangGraph.

Proofs, on both backends and in both modes:

* every sampled thread's head materializes (``CheckpointStateAccessor``,
  i.e. LangGraph's reader) to exactly the messages the scripted run returned;
* every checkpoint of a copy materializes like the same checkpoint of the
  original run, read from the original rows;
* task ids are what LangGraph computes for the new checkpoint ids;
* ids are UUIDv6 in time order with the step in the clock sequence, ``ts``
  matches, and a patched SQLite checkpoint is byte-identical to the saver's
  own serialization of the patched value.
"""

from __future__ import annotations

import random
import sqlite3

import psycopg
import pytest
from langgraph.checkpoint.base.id import uuid6

from deerflow.convert.digest import messages_sha256
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.seed import SeedPlan, seed_threads
from deerflow.seed.ids import clock_seq_of, unix_us_of, uuid6_at
from deerflow.seed.load import CloneSpec, PostgresBatch, PreparedTemplate, SqliteBatch
from deerflow.seed.script import ScriptedAgent
from deerflow.seed.template import record_template
from deerflow.storage.savers import open_checkpointer
from deerflow.storage.sqlread import checkpoint_time
from tests.backends import BACKENDS

START_US = 1_700_000_000_123_456


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["full", "delta", "mixed"])
def test_every_sampled_head_reads_back_as_the_run_wrote_it(seeded, backend, mode):
    database, report = seeded(backend, threads=40, mode=mode, fork_rate=0.5)
    assert report.threads == 40 and len(report.samples) == 40
    assert set(report.by_kind) <= ({mode} if mode != "mixed" else {"full", "delta", "migrated", "markerless"})
    with open_checkpointer(database) as saver:
        reader = CheckpointStateAccessor.for_saver(saver, mode="delta", snapshot_frequency=3)
        for sample in report.samples:
            messages = reader.get(_config(sample.thread_id)).values.get("messages") or []
            assert (len(messages), messages_sha256(messages)) == (sample.message_count, sample.head_digest), sample
            stored = list(saver.list(_config(sample.thread_id)))
            assert len(stored) == sample.checkpoints


def _copy_of(template, backend: str, database, turns: int, thread_id: str) -> None:
    batch = PostgresBatch() if backend == "postgres" else SqliteBatch()
    batch.add(PreparedTemplate(template), CloneSpec(thread_id, turns, START_US, 90_000_000), random.Random(7))
    if backend == "postgres":
        with psycopg.connect(database.postgres_url) as conn:
            batch.copy_into(conn)
    else:
        with sqlite3.connect(str(database.sqlite_path())) as conn:
            batch.insert_into(conn)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["full", "delta", "migrated", "markerless"])
def test_every_checkpoint_of_a_copy_reads_like_the_original(seeded, backend, kind):
    database, _ = seeded(backend, threads=1, mode="delta")
    template = record_template(key=f"{kind}-proof", kind=kind, dialect=backend, turns=6, snapshot_frequency=3,
                               seed="proof", fork=True, postgres_url=database.postgres_url, digests=True)
    assert template.forked_at == 3
    _copy_of(template, backend, database, 6, "copy")
    original = [(row["checkpoint_id"], turn.checkpoint_digests[row["checkpoint_id"]])
                for turn in template.turns for row in turn.checkpoints]
    with open_checkpointer(database) as saver:
        reader = CheckpointStateAccessor.for_saver(saver, mode="delta", snapshot_frequency=3)
        copied = sorted(t.config["configurable"]["checkpoint_id"] for t in saver.list(_config("copy")))
        assert len(copied) == len(original)
        for new_id, (old_id, digest) in zip(copied, original, strict=True):
            got = reader.get(_config("copy", new_id)).values.get("messages") or []
            assert messages_sha256(got) == digest, (old_id, new_id)
            assert clock_seq_of(new_id) == clock_seq_of(old_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_task_ids_are_what_langgraph_computes_for_the_new_ids(seeded, backend):
    database, _ = seeded(backend, threads=1, mode="delta")
    template = record_template(key="delta-tasks", kind="delta", dialect=backend, turns=4, snapshot_frequency=3,
                               seed="tasks", postgres_url=database.postgres_url)
    _copy_of(template, backend, database, 4, "tasks")
    with open_checkpointer(database) as saver:
        graph = ScriptedAgent("delta", 3, saver, [], random.Random(0)).graph
        tuples = list(saver.list(_config("tasks")))  # SqliteSaver.list holds its lock while iterating
        checked = 0
        for tup in tuples:
            if not tup.pending_writes:
                continue
            expected = {t.id for t in graph.get_state(tup.config).tasks}
            assert {w[0] for w in tup.pending_writes} <= expected, tup.config
            checked += 1
        assert checked >= 8


@pytest.mark.parametrize("backend", BACKENDS)
def test_ids_are_time_ordered_uuid6_with_matching_ts(seeded, backend):
    database, report = seeded(backend, threads=10, mode="mixed")
    with open_checkpointer(database) as saver:
        for sample in report.samples:
            tuples = list(saver.list(_config(sample.thread_id)))
            by_id = {t.config["configurable"]["checkpoint_id"]: t for t in tuples}
            for cid, tup in by_id.items():
                assert cid[14] == "6" and cid[19] in "89ab", cid
                assert tup.checkpoint["id"] == cid
                assert abs(checkpoint_time(cid).timestamp() - _ts(tup.checkpoint["ts"])) < 0.001
                assert clock_seq_of(cid) == tup.metadata["step"] & 0x3FFF
                parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
                assert parent is None or parent < cid  # parents are older
            assert len(by_id) == sample.checkpoints


def _ts(value: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(value).timestamp()


def _ticks(checkpoint_id: str) -> int:
    h = checkpoint_id.replace("-", "")
    return (int(h[0:12], 16) << 12) | int(h[13:16], 16)


def test_uuid6_at_has_langgraphs_layout():
    for _ in range(2000):
        real = str(uuid6(clock_seq=random.randrange(-1, 5000)))
        node = int(real.replace("-", "")[20:], 16)
        rebuilt = uuid6_at(unix_us_of(real), clock_seq_of(real), node)
        # LangGraph keeps 100 ns ticks; microseconds drop the last decimal digit of the tick count only
        # (which may borrow across the 12-bit split of the time fields, so compare ticks, not text).
        assert 0 <= _ticks(real) - _ticks(rebuilt) < 10, (real, rebuilt)
        assert rebuilt[14] == real[14] == "6" and rebuilt[19:] == real[19:], (real, rebuilt)
        assert checkpoint_time(rebuilt).replace(microsecond=0) == checkpoint_time(real).replace(microsecond=0)


def test_patched_sqlite_checkpoint_is_the_serdes_own_bytes(tmp_path):
    template = record_template(key="full-bytes", kind="full", dialect="sqlite", turns=3, snapshot_frequency=3,
                               seed="bytes")
    batch = SqliteBatch()
    batch.add(PreparedTemplate(template), CloneSpec("t", 3, START_US, 60_000_000), random.Random(1))
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    originals = [row for turn in template.turns for row in turn.checkpoints]
    for row, original in zip(batch.checkpoints, originals, strict=True):
        _tid, _ns, new_id, _parent, type_, value, metadata = row
        loaded = serde.loads_typed((type_, value))
        before = serde.loads_typed((original["type"], original["checkpoint"]))
        assert loaded["id"] == new_id and loaded["ts"] != before["ts"]
        assert {k: v for k, v in loaded.items() if k not in ("id", "ts")} == \
               {k: v for k, v in before.items() if k not in ("id", "ts")}
        assert serde.dumps_typed(loaded) == (type_, value)
        assert metadata == original["metadata"]


def test_plan_is_validated_with_the_bad_value_named(tmp_path):
    from deerflow.config.database_config import DatabaseConfig

    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path))
    for plan, text in [(SeedPlan(threads=0, turns_min=1, turns_max=2), "threads must be >= 1 and <= 10,000,000; got 0"),
                       (SeedPlan(threads=10_000_001, turns_min=1, turns_max=2), "<= 10,000,000; got 10000001"),
                       (SeedPlan(threads=1, turns_min=3, turns_max=2), "3..2"),
                       (SeedPlan(threads=1, turns_min=1, turns_max=5001), "turns_max must be <= 5000; got 5001"),
                       (SeedPlan(threads=1, turns_min=1, turns_max=2, templates=1001), "templates <= 1000"),
                       (SeedPlan(threads=1, turns_min=1, turns_max=2, mode="half"), "'half'")]:
        with pytest.raises(ValueError, match=text.replace(".", r"\.")):
            seed_threads(database, plan)
    with pytest.raises(ValueError, match="persistent backend"):
        seed_threads(DatabaseConfig(backend="memory"), SeedPlan(threads=1, turns_min=1, turns_max=1))


def _count(database) -> int:
    if database.backend == "postgres":
        with psycopg.connect(database.postgres_url) as conn:
            return conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    with sqlite3.connect(str(database.sqlite_path())) as conn:
        return conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_existing_thread_id_is_refused_before_anything_is_written(seeded, backend):
    from deerflow.seed import ThreadExistsError
    from deerflow.seed.run import _thread_ids

    database, report = seeded(backend, threads=6, mode="delta", seed="once")
    assert [s.thread_id for s in report.samples] == list(_thread_ids("once", 6))  # ids are the seed's alone
    before = _count(database)
    plan = SeedPlan(threads=6, turns_min=1, turns_max=2, mode="full", seed="once", templates=1)
    with pytest.raises(ThreadExistsError, match="already exists in") as caught:
        seed_threads(database, plan)
    assert caught.value.thread_id in {s.thread_id for s in report.samples}
    assert _count(database) == before
    # A collision in the last batch only: still nothing written (every id is checked first).
    template = record_template(key="delta-x", kind="delta", dialect=backend, turns=1, snapshot_frequency=3,
                               seed="x", postgres_url=database.postgres_url)
    third = list(_thread_ids("later", 3))[2]
    _copy_of(template, backend, database, 1, third)
    before = _count(database)
    with pytest.raises(ThreadExistsError, match=third):
        seed_threads(database, SeedPlan(threads=3, turns_min=1, turns_max=2, mode="delta", seed="later",
                                        templates=1, batch_threads=1))
    assert _count(database) == before


# -- the target: checked before anything runs ------------------------------------------------------


def test_a_sqlite_dir_in_a_missing_directory_is_refused_and_nothing_is_created(tmp_path):
    from deerflow.config.database_config import DatabaseConfig
    from deerflow.seed import SeedTargetError

    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "typo" / "data"))
    with pytest.raises(SeedTargetError, match=f"the parent directory {tmp_path / 'typo'} of database.sqlite_dir") \
            as caught:
        seed_threads(database, SeedPlan(threads=1, turns_min=1, turns_max=1))
    assert caught.value.key == "database.sqlite_dir" and "create" in caught.value.remedy
    assert list(tmp_path.iterdir()) == []


def test_a_missing_sqlite_dir_in_an_existing_directory_is_created(tmp_path):
    from deerflow.config.database_config import DatabaseConfig

    database = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data"))
    report = seed_threads(database, SeedPlan(threads=2, turns_min=1, turns_max=1, templates=1, seed="new-dir"))
    assert report.threads == 2 and report.batches == 1 and _count(database) == report.checkpoints


@pytest.mark.postgres
def test_a_missing_postgres_schema_is_refused_before_anything_is_written():
    from deerflow.config.database_config import DatabaseConfig
    from deerflow.seed import SeedTargetError
    from tests import fixtures_real

    name, url = fixtures_real.create_database("dfa_seed_schema")
    try:
        database = DatabaseConfig(backend="postgres", postgres_url=url, postgres_schema="dfa_nosuch")
        with pytest.raises(SeedTargetError, match=f"schema 'dfa_nosuch', which does not exist in database {name}"):
            seed_threads(database, SeedPlan(threads=1, turns_min=1, turns_max=1))
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA dfa_nosuch")
        report = seed_threads(database, SeedPlan(threads=2, turns_min=1, turns_max=1, templates=1))
        with psycopg.connect(url) as conn:  # the configured schema, not public
            assert conn.execute("SELECT COUNT(DISTINCT thread_id) FROM dfa_nosuch.checkpoints").fetchone() == (2,)
        assert report.threads == 2
    finally:
        fixtures_real.drop_database(name)


@pytest.mark.postgres
def test_an_unreachable_server_fails_in_seconds():
    import time

    from deerflow.config.database_config import DatabaseConfig

    database = DatabaseConfig(backend="postgres", postgres_url="postgresql://postgres@127.0.0.1:1/deerflow")
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match="Connection refused"):
        seed_threads(database, SeedPlan(threads=1, turns_min=1, turns_max=1))
    assert time.monotonic() - started < 5  # not the pool's 30 s timeout


# -- interrupted: whole batches, each with its summary rows ----------------------------------------


def _threads_and_summary(database) -> tuple[int, int, int, int]:
    """(threads with checkpoints, checkpoints, summary rows, checkpoints the summary counts)."""
    sql = ["SELECT COUNT(DISTINCT thread_id), COUNT(*) FROM checkpoints",
           "SELECT COUNT(*), COALESCE(SUM(checkpoint_count), 0) FROM dfa_thread_summary"]
    if database.backend == "postgres":
        with psycopg.connect(database.postgres_url) as conn:
            return (*conn.execute(sql[0]).fetchone(), *conn.execute(sql[1]).fetchone())
    with sqlite3.connect(str(database.sqlite_path())) as conn:
        return (*conn.execute(sql[0]).fetchone(), *conn.execute(sql[1]).fetchone())


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_interrupted_seed_keeps_whole_batches_with_their_summary_rows(seeded, backend):
    from deerflow.inventory import summary
    from deerflow.seed import SeedInterrupted, ThreadExistsError
    from deerflow.seed.run import _thread_ids

    database, first = seeded(backend, threads=5, mode="delta", seed="before")
    with open_checkpointer(database) as saver:
        summary.refresh(saver)  # built: each batch now writes its threads' summary rows too

    def ctrl_c(report):
        if report.threads >= 15:  # three batches reported; the writer may be one or two behind
            raise KeyboardInterrupt

    plan = SeedPlan(threads=200, turns_min=1, turns_max=2, mode="delta", seed="cut", templates=1, batch_threads=5)
    with pytest.raises(SeedInterrupted, match="seed interrupted after") as caught:
        seed_threads(database, plan, ctrl_c)
    got = caught.value.report
    assert isinstance(caught.value, KeyboardInterrupt) and caught.value.where.split()[0] in ("SQLite", "Postgres")
    assert (got.batches, got.threads, got.summarized) == (3, 15, 15)  # every reported batch, no other
    threads, checkpoints, rows, counted = _threads_and_summary(database)
    assert (threads, checkpoints) == (5 + got.threads, first.checkpoints + got.checkpoints)
    assert (rows, counted) == (threads, checkpoints)  # the summary holds exactly the committed threads
    with pytest.raises(ThreadExistsError) as again:  # the same seed is refused: its first ids exist
        seed_threads(database, plan)
    assert again.value.thread_id in list(_thread_ids("cut", got.threads))
    assert _threads_and_summary(database) == (threads, checkpoints, rows, counted)


# -- planner statistics after the load -------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_loaded_tables_are_analyzed_and_with_a_built_summary_its_tables_too(seeded, backend):
    from deerflow.inventory import summary

    database, report = seeded(backend, threads=200, mode="mixed", seed="stats")
    langgraph = ["checkpoints", "writes"] if backend == "sqlite" else ["checkpoints", "checkpoint_blobs",
                                                                       "checkpoint_writes"]
    assert _analyzed(database) == set(langgraph) and report.summarized == 0
    with open_checkpointer(database) as saver:
        summary.refresh(saver)
    report = seed_threads(database, SeedPlan(threads=20, turns_min=1, turns_max=2, seed="stats-2", templates=4))
    assert report.summarized == 20 and report.analyze_seconds < 5
    assert _analyzed(database) >= {*langgraph, "dfa_thread_summary", "dfa_thread_cadences"}


def _analyzed(database) -> set[str]:
    """Tables with planner statistics: ``sqlite_stat1`` rows, or Postgres's manual ``ANALYZE`` time."""
    if database.backend == "sqlite":
        with sqlite3.connect(str(database.sqlite_path())) as conn:
            return {r[0] for r in conn.execute("SELECT DISTINCT tbl FROM sqlite_stat1")}
    with psycopg.connect(database.postgres_url) as conn:
        rows = conn.execute("SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL").fetchall()
    return {r[0] for r in rows}
