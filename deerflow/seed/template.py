"""Record what LangGraph writes for one scripted thread, turn by turn, in the target's own layout.

A template is one real run of :class:`deerflow.seed.script.ScriptedAgent`
through a real LangGraph saver of the target's dialect -- an in-memory
``SqliteSaver`` for SQLite targets, a ``PostgresSaver`` in a scratch schema
of the target database for Postgres -- read back raw after every turn. So
every row a copy is made from is a row LangGraph wrote, serialized by the
saver's own serde in the saver's own column layout (``checkpoints``,
``writes`` / ``checkpoint_writes``, ``checkpoint_blobs``).

Kinds: ``full`` and ``delta`` (DeerFlow marker injected, schema of that
mode), ``migrated`` (first half written by a full-mode process, the rest by
a delta-mode one), ``markerless`` (delta schema, no DeerFlow marker: a plain
LangGraph writer). A template may fork: one turn starts from the end of the
turn before last (``checkpoint_id`` in the run config), as LangGraph UIs do.

Rows are grouped by the turn that wrote them, so the first ``n`` groups are
exactly the database a thread of ``n`` turns left behind.
"""

from __future__ import annotations

import random
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from langchain_core.runnables import RunnableConfig

from deerflow.convert.digest import messages_sha256
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.seed.ids import TaskIdRecorder
from deerflow.seed.script import ScriptedAgent, plan_turns
from deerflow.storage.dialect import Dialect

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["KINDS", "TEMPLATE_THREAD_ID", "Template", "TurnRows", "postgres_scratch", "record_template"]

KINDS = ("full", "delta", "migrated", "markerless")
TEMPLATE_THREAD_ID = "dfa-seed-template"


@dataclass
class TurnRows:
    """Rows one turn added, in insertion order (dicts keyed by column name).

    Attributes:
        checkpoints: ``checkpoint_id, parent_checkpoint_id, checkpoint_ns, type,
            checkpoint, metadata, ts`` (``checkpoint``/``metadata``: ``bytes`` on
            SQLite, JSON text on Postgres; ``ts`` the checkpoint's own ``ts``).
        writes: ``checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob``.
        blobs: Postgres only: ``checkpoint_ns, channel, version, type, blob``.
        digest: canonical messages digest of the state the run returned (the intended head).
        message_count: messages in that state (count).
        checkpoint_digests: with ``digests=True`` only: ``{checkpoint_id: messages digest}`` as
            LangGraph's reader materializes each of the turn's checkpoints from the original rows.
    """

    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)
    blobs: list[dict[str, Any]] = field(default_factory=list)
    digest: str = ""
    message_count: int = 0
    checkpoint_digests: dict[str, str] = field(default_factory=dict)


@dataclass
class Template:
    """One recorded thread: its kind, dialect, per-turn rows and the task-id recipe.

    Attributes:
        key: ``"<kind>-<index>"``.
        kind: one of :data:`KINDS`.
        dialect: ``"sqlite"`` or ``"postgres"``.
        turns: rows per turn (``turns[:n]`` is a thread of ``n`` turns).
        tasks: how LangGraph computed each task id (see :class:`TaskIdRecorder`).
        forked_at: the turn that started from an older checkpoint, or ``None``.
    """

    key: str
    kind: str
    dialect: str
    turns: list[TurnRows]
    tasks: TaskIdRecorder
    forked_at: int | None = None


# -- scratch savers ----------------------------------------------------------------

@contextmanager
def _sqlite_scratch() -> Iterator[tuple[Any, Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver, conn
    finally:
        conn.close()


@contextmanager
def postgres_scratch(url: str) -> Iterator[tuple[Any, Any]]:
    """A ``PostgresSaver`` in a new schema of the database at ``url``; the schema is dropped on exit."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    schema = f"dfa_seed_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                             options=f"-c search_path={schema}") as conn:
            saver = PostgresSaver(conn)
            saver.setup()
            yield saver, conn
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- reading back what the saver wrote ---------------------------------------------

def _new_rows_sqlite(conn: sqlite3.Connection, after: str) -> TurnRows:
    rows = TurnRows()
    cols = ("checkpoint_id", "parent_checkpoint_id", "checkpoint_ns", "type", "checkpoint", "metadata")
    for r in conn.execute(f"SELECT {', '.join(cols)} FROM checkpoints WHERE thread_id = ? AND checkpoint_id > ? "
                          "ORDER BY checkpoint_id", (TEMPLATE_THREAD_ID, after)):
        rows.checkpoints.append(dict(zip(cols, r, strict=True)))
    wcols = ("checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel", "type", "value")
    for r in conn.execute(f"SELECT {', '.join(wcols)} FROM writes WHERE thread_id = ? AND checkpoint_id > ? "
                          "ORDER BY checkpoint_id, task_id, idx", (TEMPLATE_THREAD_ID, after)):
        row = dict(zip(wcols, r, strict=True))
        row["blob"] = row.pop("value")
        rows.writes.append(row)
    return rows


def _new_rows_postgres(conn: Any, after: str, seen_blobs: set[tuple[str, str, str]]) -> TurnRows:
    rows = TurnRows()
    rows.checkpoints = conn.execute(
        "SELECT checkpoint_id, parent_checkpoint_id, checkpoint_ns, type, checkpoint::text AS checkpoint, "
        "metadata::text AS metadata FROM checkpoints WHERE thread_id = %s AND checkpoint_id > %s "
        "ORDER BY checkpoint_id", (TEMPLATE_THREAD_ID, after)).fetchall()
    rows.writes = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob FROM checkpoint_writes "
        "WHERE thread_id = %s AND checkpoint_id > %s ORDER BY checkpoint_id, task_id, idx",
        (TEMPLATE_THREAD_ID, after)).fetchall()
    # Every blob row is a version some new checkpoint references (put writes the blobs of its new_versions).
    for blob in conn.execute(
            "SELECT b.checkpoint_ns, b.channel, b.version, b.type, b.blob FROM checkpoint_blobs b "
            "WHERE b.thread_id = %s AND (b.checkpoint_ns, b.channel, b.version) IN ("
            " SELECT c.checkpoint_ns, v.key, v.value FROM checkpoints c,"
            " jsonb_each_text(c.checkpoint->'channel_versions') v"
            " WHERE c.thread_id = %s AND c.checkpoint_id > %s) ORDER BY b.channel, b.version",
            (TEMPLATE_THREAD_ID, TEMPLATE_THREAD_ID, after)).fetchall():
        key = (blob["checkpoint_ns"], blob["channel"], blob["version"])
        if key not in seen_blobs:
            seen_blobs.add(key)
            rows.blobs.append(blob)
    return rows


def _row_totals(dialect: Dialect, conn: Any) -> tuple[int, int, int]:
    """``(checkpoints, writes, blobs)`` rows the scratch saver holds (no blob table: 0 blobs)."""
    def count(table: str) -> int:
        return int(dialect.rows(conn.execute(f"SELECT count(*) AS n FROM {table}"))[0]["n"])

    return (count("checkpoints"), count(dialect.writes_table),
            count("checkpoint_blobs") if dialect.has_blob_table else 0)


def _attach_ts(dialect: Dialect, serde: Any, turn: TurnRows) -> None:
    for row in turn.checkpoints:
        if dialect.json_columns:
            import json

            row["ts"] = json.loads(row["checkpoint"])["ts"]
        else:
            row["ts"] = serde.loads_typed((row["type"], row["checkpoint"]))["ts"]


#: A scratch saver and its connection per dialect, given the target's Postgres URL (unused by SQLite).
_SCRATCH: dict[Dialect, Callable[[str], AbstractContextManager[tuple[Any, Any]]]] = {
    Dialect.SQLITE: lambda _url: _sqlite_scratch(),
    Dialect.POSTGRES: postgres_scratch,
}


# -- the run -----------------------------------------------------------------------

def _mode_at(kind: str, turn: int, turns: int) -> str:
    if kind == "migrated":
        return "full" if turn < max(1, turns // 2) else "delta"
    return "full" if kind == "full" else "delta"


def record_template(
    *, key: str, kind: str, dialect: str, turns: int, snapshot_frequency: int, seed: str,
    fork: bool = False, long_output_rate: float = 0.05, postgres_url: str | None = None, digests: bool = False,
    text_scale: float = 1.0, max_tool_rounds: int = 3,
) -> Template:
    """Run the scripted agent for ``turns`` turns through a real saver and keep its rows per turn.

    Args:
        key: the template's name (also seeds its content with ``seed``).
        kind: one of :data:`KINDS`.
        dialect: ``"sqlite"`` or ``"postgres"`` (``postgres_url`` then names the target database,
            where a scratch schema is created and dropped).
        turns: turns to run (count >= 1).
        snapshot_frequency: delta cadence (updates per snapshot).
        seed: content seed.
        fork: start one turn (the middle one, when ``turns >= 4``) from the end of the turn before last.
        long_output_rate: probability of an 8-32 KB tool output (0..1).
        digests: also materialize every checkpoint through LangGraph's reader (slow; for proofs).
        text_scale, max_tool_rounds: content size and shape (see :func:`deerflow.seed.script.plan_turns`).

    Raises:
        ValueError: an unknown kind or dialect, or ``turns < 1``.
        RuntimeError: LangGraph wrote a row this recorder cannot attribute to a turn, or a
            task id it did not see computed (the copy would not be exact).
    """
    if kind not in KINDS or dialect not in tuple(Dialect) or turns < 1:
        raise ValueError(f"bad template request: kind={kind!r} dialect={dialect!r} turns={turns!r}")
    sql = Dialect(dialect)
    rng = random.Random(f"{seed}:{key}")
    plans = plan_turns(rng, turns, long_output_rate=long_output_rate, text_scale=text_scale,
                       max_tool_rounds=max_tool_rounds)
    forked_at = turns // 2 if fork and turns >= 4 else None
    recorder = TaskIdRecorder()
    scratch = _SCRATCH[sql](postgres_url or "")
    out = Template(key=key, kind=kind, dialect=sql, turns=[], tasks=recorder, forked_at=forked_at)
    with scratch as (saver, conn), recorder.recording():
        agents: dict[str, ScriptedAgent] = {}
        ends: list[str] = []
        newest = ""
        seen_blobs: set[tuple[str, str, str]] = set()
        for t in range(turns):
            mode = _mode_at(kind, t, turns)
            agent = agents.get(mode) or agents.setdefault(
                mode, ScriptedAgent(mode, snapshot_frequency, saver, plans, rng))
            agent.turn = t
            config: dict[str, Any] = {"configurable": {"thread_id": TEMPLATE_THREAD_ID}}
            if t == forked_at:
                config["configurable"]["checkpoint_id"] = ends[t - 2]
            if kind != "markerless":
                config = inject_checkpoint_mode(config, mode)
            result = agent.graph.invoke({"messages": [agent.human()]}, cast(RunnableConfig, config))
            turn = (_new_rows_postgres(conn, newest, seen_blobs) if sql.has_blob_table
                    else _new_rows_sqlite(conn, newest))
            turn.digest, turn.message_count = messages_sha256(result["messages"]), len(result["messages"])
            _attach_ts(sql, saver.serde, turn)
            if digests:
                turn.checkpoint_digests = _digests(saver, snapshot_frequency, turn)
            newest = turn.checkpoints[-1]["checkpoint_id"]
            ends.append(newest)
            out.turns.append(turn)
        _check_complete(out, _row_totals(sql, conn))
    return out


def _digests(saver: BaseCheckpointSaver[Any], snapshot_frequency: int, turn: TurnRows) -> dict[str, str]:
    reader = CheckpointStateAccessor.for_saver(saver, mode="delta", snapshot_frequency=snapshot_frequency)
    out = {}
    for row in turn.checkpoints:
        config = {"configurable": {"thread_id": TEMPLATE_THREAD_ID, "checkpoint_ns": row["checkpoint_ns"],
                                   "checkpoint_id": row["checkpoint_id"]}}
        out[row["checkpoint_id"]] = messages_sha256(reader.get(config).values.get("messages") or [])
    return out


def _check_complete(template: Template, totals: tuple[int, int, int]) -> None:
    counted = (sum(len(t.checkpoints) for t in template.turns), sum(len(t.writes) for t in template.turns),
               sum(len(t.blobs) for t in template.turns))
    if counted != totals:
        raise RuntimeError(f"template {template.key}: recorded {counted} rows, the saver holds {totals}")
    for turn in template.turns:
        for w in turn.writes:
            if not template.tasks.knows(w["task_id"], w["checkpoint_id"]):
                raise RuntimeError(f"template {template.key}: task id {w['task_id']} was not computed "
                                   f"from checkpoint {w['checkpoint_id']}")
