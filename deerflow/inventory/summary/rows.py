"""A thread's summary row, computed from LangGraph's tables, and how it is stored.

:func:`row_select_sql` is the one definition of a row (the refresh stores
it, :func:`deerflow.inventory.listing.get_thread_summary` reads it live)::

    checkpoint_count  = COUNT(*) over every namespace
    last_checkpoint_id = MAX(checkpoint_id); head_checkpoint_id = MAX over the root namespace
    marker_count / counters_count / bare_count, head_marker / head_counters -> mode, evidence, class
        (the rules of :func:`deerflow.inventory.thread_summary.classify`, in SQL; the marker, the
        counters and their disjunction are the dialect's SQL generated from
        :mod:`deerflow.runtime.delta_evidence`, never restated here)
    replay_depth      = head counters_since_delta_snapshot.messages[0] (0 at a snapshot head,
                        NULL without delta evidence at the head)
    bytes_checkpoints = SUM(stored checkpoint + metadata); bytes_blobs = SUM(LENGTH(blob)) of
                        checkpoint_blobs (Postgres); bytes_writes = SUM(LENGTH(value)) of pending writes
"""

from __future__ import annotations

from typing import Any

from deerflow.inventory.summary.cadences import replace_cadences
from deerflow.inventory.summary.schema import SUMMARY_COLUMNS
from deerflow.inventory.summary.writes import replace_writes
from deerflow.storage.sqlread import SqlReader, Tx

__all__ = ["bump_version", "recompute", "row_params", "row_select_sql", "upsert_rows"]


def bump_version(tx: Tx) -> None:
    """Mark the summary as changed (``dfa_summary_state.version + 1``) in the transaction rewriting its rows."""
    tx.execute("UPDATE dfa_summary_state SET version = version + 1 WHERE id = 1")


def row_select_sql(reader: SqlReader, where: str) -> str:
    """``SELECT <summary columns>`` computed from LangGraph's tables for threads matching ``where``.

    ``where`` filters rows of any of the three tables by a column named
    ``thread_id`` (it is applied to each table), e.g. ``"thread_id = ?"``; its
    parameters must be passed once per table (3 times on Postgres, 2 on SQLite).
    """
    r = reader
    has_blobs = r.dialect.has_blob_table
    blobs = (f"LEFT JOIN (SELECT thread_id, SUM({r.dialect.blob_bytes()}) AS b FROM checkpoint_blobs "
             f"WHERE {where} GROUP BY thread_id) bl ON bl.thread_id = agg.thread_id"
             if has_blobs else "")
    blob_bytes = "COALESCE(bl.b, 0)" if has_blobs else "0"
    head_delta = r.delta_evidence('h')
    mode_cls = (
        "CASE WHEN agg.marker_count = 0 AND agg.counters_count = 0 THEN 'full' "
        f"WHEN NOT {head_delta} OR h.checkpoint_id IS NULL THEN 'inconsistent' "
        "WHEN agg.marker_count = 0 THEN 'delta_counters_only' "
        "WHEN agg.bare_count > 0 THEN 'migrated' ELSE 'delta' END"
    )
    return f"""
        SELECT agg.thread_id, agg.checkpoint_count, agg.last_checkpoint_id, agg.head_checkpoint_id,
               agg.marker_count, agg.counters_count, agg.bare_count,
               {r.truthy(r.marker('h'))} AS head_marker, {r.truthy(r.counters('h'))} AS head_counters,
               CASE WHEN agg.marker_count > 0 OR agg.counters_count > 0 THEN 'delta' ELSE 'full' END AS mode,
               CASE WHEN agg.marker_count > 0 THEN 'deerflow_marker'
                    WHEN agg.counters_count > 0 THEN 'langgraph_counters' END AS mode_evidence,
               {mode_cls} AS thread_class,
               CASE WHEN {r.counters('h')} THEN {r.counter('h', 0)} WHEN {r.marker('h')} THEN 0 END AS replay_depth,
               agg.bytes_checkpoints, {blob_bytes} AS bytes_blobs, COALESCE(wr.b, 0) AS bytes_writes,
               agg.bytes_checkpoints + {blob_bytes} + COALESCE(wr.b, 0) AS bytes_total
        FROM (
            SELECT c.thread_id, COUNT(*) AS checkpoint_count, MAX(c.checkpoint_id) AS last_checkpoint_id,
                   MAX(CASE WHEN c.checkpoint_ns = '' THEN c.checkpoint_id END) AS head_checkpoint_id,
                   SUM({r.truthy(r.marker())}) AS marker_count, SUM({r.truthy(r.counters())}) AS counters_count,
                   SUM(CASE WHEN c.checkpoint_ns = '' AND NOT {r.marker()} AND NOT {r.counters()}
                            AND COALESCE({r.step()}, -1) >= 0 THEN 1 ELSE 0 END) AS bare_count,
                   SUM({r.checkpoint_bytes()}) AS bytes_checkpoints
            FROM checkpoints c WHERE {where.replace('thread_id', 'c.thread_id')} GROUP BY c.thread_id
        ) agg
        LEFT JOIN checkpoints h
          ON h.thread_id = agg.thread_id AND h.checkpoint_ns = '' AND h.checkpoint_id = agg.head_checkpoint_id
        {blobs}
        LEFT JOIN (SELECT w.thread_id, SUM({r.write_bytes()}) AS b FROM {r.writes_table} w
                   WHERE {where.replace('thread_id', 'w.thread_id')} GROUP BY w.thread_id) wr
          ON wr.thread_id = agg.thread_id
    """


def row_params(reader: SqlReader, params: list[Any]) -> list[Any]:
    """``params`` of a :func:`row_select_sql` filter, repeated once per table it filters."""
    return params * len(reader.dialect.saver_tables)


def upsert_rows(tx: Tx, reader: SqlReader, where: str, params: list[Any]) -> int:
    """Store the recomputed rows of the threads matching ``where``; returns rows written."""
    columns = [c.strip() for c in SUMMARY_COLUMNS.split(",")]
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns[1:])
    # SQLite needs a WHERE in INSERT ... SELECT ... ON CONFLICT to parse the upsert clause.
    return tx.execute(f"INSERT INTO dfa_thread_summary ({SUMMARY_COLUMNS}) SELECT * FROM ("
                      f"{row_select_sql(reader, where)}) AS fresh WHERE true "
                      f"ON CONFLICT (thread_id) DO UPDATE SET {updates}", row_params(reader, params))


def recompute(tx: Tx, reader: SqlReader, thread_ids: list[str], chunk: int = 500) -> int:
    """Recompute the rows (and cadence and write facts) of ``thread_ids``; drop the rows of threads now empty."""
    written = 0
    if thread_ids:
        bump_version(tx)
    for i in range(0, len(thread_ids), chunk):
        part = thread_ids[i:i + chunk]
        marks = ", ".join("?" for _ in part)
        written += upsert_rows(tx, reader, f"thread_id IN ({marks})", part)
        replace_writes(tx, reader, f"thread_id IN ({marks})", part)
        replace_cadences(tx, reader, f"thread_id IN ({marks})", part)  # reads the writes' snapshot facts
        tx.execute(f"DELETE FROM dfa_thread_summary WHERE thread_id IN ({marks}) AND NOT EXISTS ("
                   "SELECT 1 FROM checkpoints c WHERE c.thread_id = dfa_thread_summary.thread_id)", part)
    return written
