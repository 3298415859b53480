"""``seed_threads``: record templates, check the target and the ids, then hand batches to the writer."""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.inventory.summary import access as summary_access
from deerflow.seed.load import CloneSpec, PreparedTemplate
from deerflow.seed.plan import SeedInterrupted, SeedPlan, SeedReport, ThreadExistsError
from deerflow.seed.target import analyze, check_target, loaded_tables
from deerflow.seed.template import Template, record_template
from deerflow.seed.writer import _BATCH_BYTES, _account, _new_batch, _sample, _Writer
from deerflow.storage.dialect import Dialect
from deerflow.storage.savers import open_checkpointer, sqlite_checkpoint_path
from deerflow.storage.sqlread import Tx, reader_for, table_exists

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["describe_database", "seed_threads"]

_MIXED_WEIGHTS = {"full": 40, "delta": 45, "migrated": 10, "markerless": 5}
_DAY_US = 86_400_000_000
_CHECK_IDS = 900


def _kinds(mode: str) -> dict[str, int]:
    return {mode: 1} if mode != "mixed" else dict(_MIXED_WEIGHTS)


def _record_all(database: DatabaseConfig, plan: SeedPlan, seed: str) -> list[Template]:
    weights = _kinds(plan.mode)
    count = max(len(weights), min(plan.templates, plan.threads))
    rng = random.Random(f"{seed}:templates")
    # Kinds proportional to their weight, every kind at least once.
    kinds = list(weights)
    while len(kinds) < count:
        kinds.append(max(weights, key=lambda k: weights[k] / (1 + kinds.count(k))))
    dialect = Dialect.of_database(database, purpose="seeding")
    return [
        record_template(key=f"{kind}-{i}", kind=kind, dialect=dialect, turns=plan.turns_max,
                        snapshot_frequency=plan.snapshot_frequency, seed=seed,
                        fork=rng.random() < plan.fork_rate, long_output_rate=plan.long_output_rate,
                        postgres_url=database.postgres_url, text_scale=plan.text_scale,
                        max_tool_rounds=plan.max_tool_rounds)
        for i, kind in enumerate(kinds)
    ]


def _thread_ids(seed: str, count: int) -> Iterator[str]:
    """The ``count`` thread ids of ``seed`` (UUIDv4 strings; the same seed always gives the same sequence)."""
    rng = random.Random(f"{seed}:thread-ids")
    for _ in range(count):
        yield str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _specs(plan: SeedPlan, templates: list[Template], rng: random.Random,
           seed: str) -> Iterator[tuple[Template, CloneSpec]]:
    weights = _kinds(plan.mode)
    by_kind = {k: [t for t in templates if t.kind == k] for k in weights}
    now_us = time.time_ns() // 1000
    kinds, kind_weights = list(weights), list(weights.values())
    for tid in _thread_ids(seed, plan.threads):
        template = rng.choice(by_kind[rng.choices(kinds, kind_weights)[0]])
        turns = rng.randint(plan.turns_min, plan.turns_max)
        gap = rng.randint(30, 900) * 1_000_000
        length = turns * gap + sum(len(t.checkpoints) for t in template.turns[:turns]) * 2_000_000
        end = now_us - int(rng.random() * plan.span_days * _DAY_US) - 60_000_000
        yield template, CloneSpec(thread_id=tid, turns=turns, start_us=end - length, turn_gap_us=gap)


def describe_database(database: DatabaseConfig) -> str:
    """A short, password-free name of ``database`` for messages.

    Returns:
        ``"SQLite file <path>"`` or ``"Postgres database <name> on <host>:<port>"``.
    """
    if database.backend == "sqlite":
        return f"SQLite file {sqlite_checkpoint_path(database)}"
    import psycopg

    info = psycopg.conninfo.conninfo_to_dict(database.postgres_url or "")
    return (f"Postgres database {info.get('dbname', '?')} on {info.get('host', 'localhost')}:"
            f"{info.get('port', 5432)}")


def _refuse_existing(conn: Any, dialect: str, database: DatabaseConfig, seed: str, count: int) -> None:
    """Raise :class:`ThreadExistsError` if any of the plan's thread ids has a checkpoint (one query per 900 ids)."""
    tx = Tx(dialect, conn)
    ids = _thread_ids(seed, count)
    while chunk := list(itertools.islice(ids, _CHECK_IDS)):
        where, params = tx.dialect.in_list("thread_id", chunk)
        rows = tx.query(f"SELECT thread_id FROM checkpoints WHERE {where} LIMIT 1", params)
        if rows:
            raise ThreadExistsError(rows[0]["thread_id"], describe_database(database))


def _summary_built(saver: BaseCheckpointSaver[Any]) -> bool:
    """True when the database has a built thread summary this role may write (migrated first).

    Probes before migrating: a database without summary tables gets none from
    the seeder (the first refresh creates and builds them after the load, so
    the bulk load does not maintain the summary's index on ``checkpoints``).
    """
    reader = reader_for(saver)
    if not table_exists(reader, "dfa_summary_state") or summary_access(saver) != "write":
        return False
    return reader.query("SELECT watermark FROM dfa_summary_state WHERE id = 1")[0]["watermark"] is not None


def seed_threads(database: DatabaseConfig, plan: SeedPlan,
                 progress: Callable[[SeedReport], None] | None = None, *, summarize: bool = True,
                 analyze_tables: bool = True) -> SeedReport:
    """Write ``plan.threads`` threads into ``database`` (tables created if missing).

    The target is checked first (:func:`check_target`). Nothing is written
    when a thread id of the plan already exists. With ``summarize`` and a
    built thread summary, every batch recomputes the summary rows of its own
    threads in its transaction (the rows and their summary commit together);
    otherwise the summary is left alone. Last, the tables written are
    analyzed (planner statistics; see :mod:`deerflow.seed.target`).

    Args:
        database: a ``sqlite`` or ``postgres`` ``database:`` block.
        plan: what to write (validated first).
        progress: called with the running report after each batch (and once, with 0 threads,
            after the templates are recorded).
        summarize: keep a built summary current as batches commit (``False``: leave it, e.g.
            when the caller rebuilds it anyway; seeded ids are older than the summary's
            watermark, so only a full refresh would then find them).
        analyze_tables: ``ANALYZE`` the tables written at the end (LangGraph's, and the summary's
            when ``summarized``).

    Returns:
        A :class:`SeedReport`.

    Raises:
        ValueError: a bad plan, or the ``memory`` backend (nothing would persist).
        SeedTargetError: (a ``ValueError``) ``sqlite_dir`` is in a directory that does not exist, or
            the Postgres schema does not exist; nothing was written.
        psycopg.OperationalError: the Postgres server or database cannot be reached (within
            :data:`deerflow.seed.target.CONNECT_TIMEOUT_S`); nothing was written.
        SeedInterrupted: (a ``KeyboardInterrupt``) interrupted; carries what was committed.
        ThreadExistsError: (a ``ValueError``) a thread id of the plan already has checkpoints;
            nothing was written. Ids depend on ``plan.seed`` only. (A thread another writer
            creates between the check and the load is not detected.)
        RuntimeError: a template run wrote rows the recorder cannot copy exactly.
        psycopg.Error / sqlite3.Error: the database refused the rows.
    """
    plan.validate()
    check_target(database)
    started = time.monotonic()
    seed = str(plan.seed if plan.seed is not None else uuid.uuid4().hex)
    writer: _Writer | None = None
    try:
        with open_checkpointer(database, create=True) as saver:  # LangGraph's own setup(): tables and migrations
            reader = reader_for(saver) if summarize and _summary_built(saver) else None
            with _Writer(database, reader) as writer:
                _refuse_existing(writer.conn, writer.dialect, database, seed, plan.threads)
                writer.conn.commit()  # no transaction stays open while templates are recorded
                templates = _record_all(database, plan, seed)
                prepared = {t.key: PreparedTemplate(t) for t in templates}
                report = SeedReport(record_seconds=round(time.monotonic() - started, 3))
                if progress:
                    progress(report)
                _write_all(writer, plan, templates, prepared, report, seed, started, progress)
        report.summarized, report.summary_seconds = writer.summarized, round(writer.summary_seconds, 3)
        report.batches = writer.committed.batches
        if analyze_tables:
            tables = loaded_tables(writer.dialect, summary=report.summarized > 0)
            report.analyze_seconds = round(analyze(database, tables), 3)
    except KeyboardInterrupt as exc:
        committed = writer.committed if writer is not None else SeedReport()
        committed.seconds = round(time.monotonic() - started, 3)
        raise SeedInterrupted(committed, describe_database(database)) from exc
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _write_all(writer: _Writer, plan: SeedPlan, templates: list[Template], prepared: dict[str, PreparedTemplate],
               report: SeedReport, seed: str, started: float,
               progress: Callable[[SeedReport], None] | None) -> None:
    rng = random.Random(f"{seed}:threads")
    stride = max(1, plan.threads // 64)
    kinds: Counter[str] = Counter()
    batch, ids = _new_batch(writer.dialect), []
    for i, (template, spec) in enumerate(_specs(plan, templates, rng, seed)):
        batch.add(prepared[template.key], spec, rng)
        ids.append(spec.thread_id)
        kinds[template.kind] += 1
        if i % stride == 0 and len(report.samples) < 64:
            report.samples.append(_sample(template, spec))
        full = (i + 1) % plan.batch_threads == 0 or batch.pending_bytes >= _BATCH_BYTES
        if full or i + 1 == plan.threads:
            writer.submit(batch, ids)
            _account(report, batch, i + 1, kinds, started)
            if progress:
                progress(report)
            batch, ids = _new_batch(writer.dialect), []
