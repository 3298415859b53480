"""The inventory row of one thread and the thread classes it is sorted into.

Every fact comes from the ``checkpoints`` table's ids and metadata (the
DeerFlow marker and LangGraph's ``counters_since_delta_snapshot``, spec
"Marker contract") and the stored sizes of its rows.

Thread classes (:class:`ThreadClass`, used by the list, the census and the API):

``full``
    no checkpoint carries delta evidence.
``delta``
    DeerFlow-marked delta thread, marked head, no legacy full ancestors.
``delta_counters_only``
    delta by LangGraph counters only (no DeerFlow marker anywhere), counters at the head.
``migrated``
    delta head over legacy full (unmarked, step >= 0) ancestors.
``inconsistent``
    a head that looks full over delta ancestors: either a full-mode write
    onto a delta thread, or a marker-less delta thread whose head is a
    snapshot checkpoint (LangGraph drops the counters there), which the
    spec's head-only gate misreads as full.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from deerflow.sqlread import checkpoint_time

__all__ = ["THREAD_CLASSES", "ThreadClass", "ThreadSummary", "classify", "summary_from_row"]


class ThreadClass(StrEnum):
    """A thread's class (module docstring); the values are the strings stored and sent in JSON."""

    FULL = "full"
    DELTA = "delta"
    DELTA_COUNTERS_ONLY = "delta_counters_only"
    MIGRATED = "migrated"
    INCONSISTENT = "inconsistent"


#: Every :class:`ThreadClass` value, in the order the list and the census show them.
THREAD_CLASSES = tuple(c.value for c in ThreadClass)


@dataclass(frozen=True)
class ThreadSummary:
    """One thread's inventory row (all from metadata and stored sizes).

    Attributes:
        thread_id: LangGraph thread id.
        checkpoint_count: checkpoints in every namespace (count).
        head_checkpoint_id: newest root-namespace checkpoint id (``None`` if only subgraph rows).
        last_checkpoint_id: newest checkpoint id in any namespace.
        updated_at: time of ``last_checkpoint_id`` (UUIDv6 time), UTC.
        marker_count: checkpoints carrying the DeerFlow delta marker (count).
        counters_count: checkpoints carrying LangGraph ``messages`` counters (count).
        bare_count: root-namespace checkpoints with step >= 0 and neither marker nor counters (count).
        head_marker: the head carries the DeerFlow marker.
        head_counters: the head carries LangGraph ``messages`` counters.
        mode: ``"delta"`` if any checkpoint shows delta evidence, else ``"full"``.
        mode_evidence: ``"deerflow_marker"``, ``"langgraph_counters"`` or ``None``.
        thread_class: one of :data:`THREAD_CLASSES`.
        bytes_checkpoints: stored bytes of its ``checkpoints`` rows (Postgres: on disk, compressed).
        bytes_blobs: bytes of its ``checkpoint_blobs`` values (Postgres; 0 on SQLite, which keeps
            values inside the checkpoint).
        bytes_writes: bytes of its pending-write values.
        replay_depth: updates since the last ``_DeltaSnapshot`` at the head (the head's
            ``counters_since_delta_snapshot.messages[0]``; 0 at a snapshot head; ``None`` for a
            head without delta evidence): the writes a reader replays to materialize the head.
        title: DeerFlow's title of the thread (``threads_meta.display_name``), or ``None``.
        owner: DeerFlow's owner of the thread (``threads_meta.user_id``), or ``None``.
        deerflow_thread: True when DeerFlow's ``threads_meta`` has a row for the thread, False when it has
            none, ``None`` when the database has no such table (or it was not looked up: the list and the
            thread page look it up, :mod:`deerflow.storage.deerflow_tables`).
    """

    thread_id: str
    checkpoint_count: int
    head_checkpoint_id: str | None
    last_checkpoint_id: str | None
    updated_at: dt.datetime | None
    marker_count: int
    counters_count: int
    bare_count: int
    head_marker: bool
    head_counters: bool
    mode: str
    mode_evidence: str | None
    thread_class: str
    bytes_checkpoints: int = 0
    bytes_blobs: int = 0
    bytes_writes: int = 0
    replay_depth: int | None = None
    title: str | None = None
    owner: str | None = None
    deerflow_thread: bool | None = None

    @property
    def bytes_total(self) -> int:
        """All stored bytes of the thread (checkpoints + blobs + writes)."""
        return self.bytes_checkpoints + self.bytes_blobs + self.bytes_writes

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (``updated_at`` as ISO 8601, ``bytes_total`` included)."""
        out = asdict(self)
        out["updated_at"] = self.updated_at.isoformat() if self.updated_at else None
        out["bytes_total"] = self.bytes_total
        return out


def classify(*, marker_count: int, counters_count: int, bare_count: int, head_marker: bool,
             head_counters: bool) -> ThreadClass:
    """The thread class from metadata counts (see the module docstring for the rules)."""
    if marker_count == 0 and counters_count == 0:
        return ThreadClass.FULL
    head_delta = head_marker or head_counters
    if not head_delta:
        return ThreadClass.INCONSISTENT
    if marker_count == 0:
        return ThreadClass.DELTA_COUNTERS_ONLY
    if bare_count > 0:
        return ThreadClass.MIGRATED
    return ThreadClass.DELTA


def summary_from_row(row: dict[str, Any]) -> ThreadSummary:
    """A :class:`ThreadSummary` from a naive-aggregate row (classified here) or a summary-table row."""
    marker_count = int(row["marker_count"] or 0)
    counters_count = int(row["counters_count"] or 0)
    facts = {
        "marker_count": marker_count,
        "counters_count": counters_count,
        "bare_count": int(row["bare_count"] or 0),
        "head_marker": bool(row["head_marker"]),
        "head_counters": bool(row["head_counters"]),
    }
    evidence = "deerflow_marker" if marker_count else ("langgraph_counters" if counters_count else None)
    replay = row.get("replay_depth")
    return ThreadSummary(
        thread_id=row["thread_id"],
        checkpoint_count=int(row["checkpoint_count"]),
        head_checkpoint_id=row["head_checkpoint_id"],
        last_checkpoint_id=row["last_checkpoint_id"],
        updated_at=checkpoint_time(row["last_checkpoint_id"]),
        mode="delta" if evidence else "full",
        mode_evidence=evidence,
        thread_class=row.get("thread_class") or classify(**facts),
        bytes_checkpoints=int(row.get("bytes_checkpoints") or 0),
        bytes_blobs=int(row.get("bytes_blobs") or 0),
        bytes_writes=int(row.get("bytes_writes") or 0),
        replay_depth=None if replay is None else int(replay),
        **facts,
    )

