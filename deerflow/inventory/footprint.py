"""Where a thread's storage went: stored bytes per checkpoint over the thread's life.

Each checkpoint of one namespace is charged (bytes):

* ``checkpoint``: its own ``checkpoints`` row (checkpoint + metadata; the
  size definition of :meth:`deerflow.storage.sqlread.SqlReader.checkpoint_bytes`);
* ``blobs``: Postgres ``checkpoint_blobs`` values of the channel versions it
  is the *first* to reference (LangGraph writes a blob once per version, so
  this is what storing the checkpoint added); always 0 on SQLite, whose
  values live inside the checkpoint row;
* ``writes``: the pending writes stored under it.

Summed over a namespace this is its share of the summary's bytes (blobs no
checkpoint references are charged to nobody). Reads only the thread's own
rows; materializes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deerflow.storage.dialect import Dialect
from deerflow.storage.sqlread import reader_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["CheckpointBytes", "checkpoint_bytes"]


@dataclass(frozen=True)
class CheckpointBytes:
    """Stored bytes charged to one checkpoint (see the module docstring).

    Attributes:
        checkpoint_id: the checkpoint (series are in id, i.e. creation, order).
        step: its metadata ``step`` or ``None``.
        checkpoint: bytes of its own row.
        blobs: bytes of blob versions it introduced (Postgres).
        writes: bytes of pending writes stored under it.
        snapshot: a delta snapshot: the row carries DeerFlow's delta marker but no LangGraph
            ``counters_since_delta_snapshot`` (LangGraph writes the counters on every other delta
            checkpoint; read from the metadata, nothing deserialized).
    """

    checkpoint_id: str
    step: int | None
    checkpoint: int
    blobs: int
    writes: int
    snapshot: bool = False

    @property
    def total(self) -> int:
        """``checkpoint + blobs + writes`` (bytes)."""
        return self.checkpoint + self.blobs + self.writes


def _sql(dialect: Dialect) -> str:
    base = (f"SELECT c.checkpoint_id, {dialect.step('c')} AS step, {dialect.checkpoint_bytes('c')} AS own, "
            f"({dialect.marker('c')} AND NOT {dialect.counters('c')}) AS snap "
            "FROM checkpoints c WHERE c.thread_id = ? AND c.checkpoint_ns = ?")
    writes = (f"SELECT w.checkpoint_id, SUM({dialect.write_bytes('w')}) AS b FROM {dialect.writes_table} w "
              "WHERE w.thread_id = ? AND w.checkpoint_ns = ? GROUP BY w.checkpoint_id")
    if not dialect.has_blob_table:
        return (f"SELECT cps.checkpoint_id, cps.step, cps.own, cps.snap, 0 AS blobs, COALESCE(wb.b, 0) AS writes "
                f"FROM ({base}) cps LEFT JOIN ({writes}) wb ON wb.checkpoint_id = cps.checkpoint_id "
                "ORDER BY cps.checkpoint_id")
    return f"""
        WITH refs AS (
            SELECT v.key AS channel, v.value AS version, MIN(c.checkpoint_id) AS checkpoint_id
            FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v
            WHERE c.thread_id = ? AND c.checkpoint_ns = ?
            GROUP BY v.key, v.value
        ), introduced AS (
            SELECT r.checkpoint_id, SUM({dialect.blob_bytes('b')}) AS b
            FROM refs r JOIN checkpoint_blobs b
              ON b.thread_id = ? AND b.checkpoint_ns = ? AND b.channel = r.channel AND b.version = r.version
            GROUP BY r.checkpoint_id
        )
        SELECT cps.checkpoint_id, cps.step, cps.own, cps.snap, COALESCE(ib.b, 0) AS blobs, COALESCE(wb.b, 0) AS writes
        FROM ({base}) cps
        LEFT JOIN introduced ib ON ib.checkpoint_id = cps.checkpoint_id
        LEFT JOIN ({writes}) wb ON wb.checkpoint_id = cps.checkpoint_id
        ORDER BY cps.checkpoint_id
    """


def checkpoint_bytes(saver: BaseCheckpointSaver[Any], thread_id: str, checkpoint_ns: str = "") -> list[CheckpointBytes]:
    """Bytes charged to every checkpoint of ``thread_id`` / ``checkpoint_ns``, oldest first.

    Returns:
        One :class:`CheckpointBytes` per checkpoint (empty for an unknown thread).

    Raises:
        NoSqlTablesError: the saver keeps no SQL tables (``InMemorySaver``; also a ``TypeError``).
    """
    r = reader_for(saver)
    sql = _sql(r.dialect)
    key = [thread_id, checkpoint_ns]
    params = key * (4 if r.dialect.has_blob_table else 2)
    return [CheckpointBytes(row["checkpoint_id"], None if row["step"] is None else int(row["step"]),
                            int(row["own"] or 0), int(row["blobs"] or 0), int(row["writes"] or 0), bool(row["snap"]))
            for row in r.query(sql, params)]
