"""Copy recorded template rows into a checkpoint database as new threads, in bulk.

A copy of a template's first ``n`` turns changes exactly what a second run
at other instants would have changed, and nothing else:

* ``thread_id`` (every table);
* checkpoint ids: a UUIDv6 at the copy's chosen time with the template id's
  clock sequence (LangGraph's step) and fresh node bits
  (:func:`deerflow.seed.ids.uuid6_at`); ``parent_checkpoint_id`` follows;
* the checkpoint's own ``id`` and ``ts``, in place, in the serialized value
  (Postgres JSON text; SQLite msgpack, where a string of the same length
  re-encodes to the same bytes, so the patched value *is* what the saver's
  serde would write);
* task ids of pending writes, recomputed by LangGraph's own task-id function
  from the new checkpoint id (:class:`deerflow.seed.ids.TaskIdRecorder`).

Metadata, blobs, write values, channel versions and task paths are copied
byte for byte. Postgres rows go in with ``COPY ... (FORMAT BINARY)``; SQLite
rows with ``executemany`` in one transaction per batch.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from deerflow.seed.ids import clock_seq_of, iso_ts, uuid6_at
from deerflow.seed.template import Template
from deerflow.storage.dialect import Dialect

__all__ = ["CloneSpec", "PostgresBatch", "PreparedTemplate", "STEP_GAP_US", "SqliteBatch"]

#: Seconds between two checkpoints of one turn (LangGraph steps of an agent turn).
STEP_GAP_US = 1_700_000

_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)
_NULL = struct.pack(">i", -1)


def _f(value: bytes | None) -> bytes:
    """One binary-COPY field: int32 length + bytes, or -1 for NULL."""
    return _NULL if value is None else struct.pack(">i", len(value)) + value


def _text(value: str | None) -> bytes:
    return _f(None if value is None else value.encode("utf-8"))


def _split(value: bytes, first: bytes, second: bytes) -> tuple[bytes, bytes, bytes, bool]:
    """``value`` split around the single occurrences of ``first`` and ``second``; flag: first comes first."""
    a, b = value.find(first), value.find(second)
    if a < 0 or b < 0 or value.count(first) != 1 or value.count(second) != 1:
        raise RuntimeError("checkpoint id or ts does not occur exactly once in the stored checkpoint")
    if a < b:
        return value[:a], value[a + len(first):b], value[b + len(second):], True
    return value[:b], value[b + len(second):a], value[a + len(first):], False


@dataclass(frozen=True)
class CloneSpec:
    """One thread to write: which template, how many turns, which id, when it started.

    Attributes:
        thread_id: the new thread's id.
        turns: turns copied from the template (count, 1..len(template.turns)).
        start_us: time of its first checkpoint, microseconds since the Unix epoch.
        turn_gap_us: time between the last checkpoint of a turn and the next turn's first (microseconds).
    """

    thread_id: str
    turns: int
    start_us: int
    turn_gap_us: int


class PreparedTemplate:
    """A template with each row's constant parts pre-encoded for fast copying.

    Args:
        template: a recorded :class:`Template`.
    """

    def __init__(self, template: Template):
        self.template = template
        self.dialect = Dialect(template.dialect)
        self.turn_checkpoints: list[list[tuple[Any, ...]]] = []
        self.turn_writes: list[list[tuple[Any, ...]]] = []
        self.turn_blobs: list[list[bytes]] = []
        for turn in template.turns:
            self.turn_checkpoints.append([self._prepare_checkpoint(c) for c in turn.checkpoints])
            self.turn_writes.append([self._prepare_write(w) for w in turn.writes])
            self.turn_blobs.append([self._prepare_blob(b) for b in turn.blobs])

    def _prepare_checkpoint(self, row: dict[str, Any]) -> tuple[Any, ...]:
        value = row["checkpoint"].encode("utf-8") if self.dialect.json_columns else row["checkpoint"]
        parts = _split(value, row["checkpoint_id"].encode("ascii"), row["ts"].encode("ascii"))
        metadata = row["metadata"]
        if self.dialect.bulk_copy:  # a binary COPY field of JSONB: version 1, then the JSON text
            metadata = _f(b"\x01" + metadata.encode("utf-8"))
        return (row["checkpoint_id"], row["parent_checkpoint_id"], row["checkpoint_ns"], row["type"],
                parts, metadata, clock_seq_of(row["checkpoint_id"]))

    def _prepare_write(self, row: dict[str, Any]) -> tuple[Any, ...]:
        if not self.dialect.bulk_copy:
            return (row["checkpoint_id"], row["task_id"], row["checkpoint_ns"],
                    (row["task_path"], row["idx"], row["channel"], row["type"], row["blob"]))
        tail = (_text(row["task_path"]) + _f(struct.pack(">i", row["idx"])) + _text(row["channel"])
                + _text(row["type"]) + _f(row["blob"]))
        return row["checkpoint_id"], row["task_id"], _text(row["checkpoint_ns"]), tail

    def _prepare_blob(self, row: dict[str, Any]) -> bytes:
        return (_text(row["checkpoint_ns"]) + _text(row["channel"]) + _text(row["version"])
                + _text(row["type"]) + _f(row["blob"]))


def _new_ids(prepared: PreparedTemplate, spec: CloneSpec, rng: random.Random) -> tuple[dict[str, str], dict[str, str]]:
    """``({template checkpoint id: new id}, {new id: new ts})`` for the copy's checkpoints, in time order."""
    ids: dict[str, str] = {}
    stamps: dict[str, str] = {}
    us = spec.start_us
    for t, turn in enumerate(prepared.turn_checkpoints[:spec.turns]):
        for j, row in enumerate(turn):
            if t or j:
                us += STEP_GAP_US if j else spec.turn_gap_us
            new = uuid6_at(us, row[6], rng.getrandbits(48))
            ids[row[0]] = new
            stamps[new] = iso_ts(us)
    return ids, stamps


def _patched(parts: tuple[bytes, bytes, bytes, bool], new_id: str, new_ts: str) -> bytes:
    head, mid, tail, id_first = parts
    first, second = (new_id, new_ts) if id_first else (new_ts, new_id)
    return head + first.encode("ascii") + mid + second.encode("ascii") + tail


class PostgresBatch:
    """Binary COPY payloads for ``checkpoints``, ``checkpoint_writes`` and ``checkpoint_blobs``.

    Add threads with :meth:`add`, then :meth:`copy_into` a psycopg connection
    (inside the caller's transaction).
    """

    CHECKPOINT_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"
    WRITE_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob"
    BLOB_COLUMNS = "thread_id, checkpoint_ns, channel, version, type, blob"

    def __init__(self) -> None:
        self.checkpoints: list[bytes] = []
        self.writes: list[bytes] = []
        self.blobs: list[bytes] = []
        self.bytes = 0
        self.pending_bytes = 0
        self.counts = [0, 0, 0]

    def add(self, prepared: PreparedTemplate, spec: CloneSpec, rng: random.Random) -> None:
        """Append the rows of one copy."""
        ids, stamps = _new_ids(prepared, spec, rng)
        tid = _text(spec.thread_id)
        tasks = prepared.template.tasks
        n7, n9, n6 = struct.pack(">h", 7), struct.pack(">h", 9), struct.pack(">h", 6)
        out_c, out_w, out_b = self.checkpoints, self.writes, self.blobs
        for t in range(spec.turns):
            for old, parent, ns, type_, parts, metadata, _seq in prepared.turn_checkpoints[t]:
                new = ids[old]
                value = b"\x01" + _patched(parts, new, stamps[new])
                row = (n7 + tid + _text(ns) + _text(new) + _text(ids[parent] if parent else None)
                       + _text(type_) + _f(value) + metadata)
                self.pending_bytes += len(row)
                out_c.append(row)
            task_ids: dict[tuple[str, str], str] = {}
            for old, task_id, ns_field, tail in prepared.turn_writes[t]:
                new = ids[old]
                key = (task_id, new)
                new_task = task_ids.get(key) or task_ids.setdefault(key, tasks.remap(task_id, new))
                out_w.append(n9 + tid + ns_field + _text(new) + _text(new_task) + tail)
                self.pending_bytes += len(tail) + 120
            for tail in prepared.turn_blobs[t]:
                out_b.append(n6 + tid + tail)
                self.pending_bytes += len(tail) + 40
        self.counts = [len(out_c), len(out_w), len(out_b)]

    def copy_into(self, conn: Any) -> int:
        """COPY everything added into the connection's tables; returns the bytes sent."""
        sent = 0
        for table, columns, rows in (("checkpoint_blobs", self.BLOB_COLUMNS, self.blobs),
                                     ("checkpoints", self.CHECKPOINT_COLUMNS, self.checkpoints),
                                     ("checkpoint_writes", self.WRITE_COLUMNS, self.writes)):
            if not rows:
                continue
            with conn.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(_COPY_HEADER)
                for chunk in _chunks(rows, 2_000):
                    data = b"".join(chunk)
                    sent += len(data)
                    copy.write(data)
                copy.write(_COPY_TRAILER)
        self.bytes += sent
        return sent


class SqliteBatch:
    """Parameter tuples for LangGraph's SQLite ``checkpoints`` and ``writes`` tables."""

    CHECKPOINT_SQL = ("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
                      "type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)")
    WRITE_SQL = ("INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
                 "channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")

    def __init__(self) -> None:
        self.checkpoints: list[tuple[Any, ...]] = []
        self.writes: list[tuple[Any, ...]] = []
        self.bytes = 0
        self.counts = [0, 0, 0]

    @property
    def pending_bytes(self) -> int:
        """Payload bytes held (bytes)."""
        return self.bytes

    def add(self, prepared: PreparedTemplate, spec: CloneSpec, rng: random.Random) -> None:
        """Append the rows of one copy."""
        ids, stamps = _new_ids(prepared, spec, rng)
        tasks = prepared.template.tasks
        task_ids: dict[tuple[str, str], str] = {}
        for t in range(spec.turns):
            for old, parent, ns, type_, parts, metadata, _seq in prepared.turn_checkpoints[t]:
                new = ids[old]
                value = _patched(parts, new, stamps[new])
                self.bytes += len(value) + len(metadata)
                self.checkpoints.append((spec.thread_id, ns, new, ids[parent] if parent else None,
                                         type_, value, metadata))
            for old, task_id, ns, (path, idx, channel, type_, blob) in prepared.turn_writes[t]:
                new = ids[old]
                self.bytes += len(blob or b"")
                key = (task_id, new)
                new_task = task_ids.get(key) or task_ids.setdefault(key, tasks.remap(task_id, new))
                self.writes.append((spec.thread_id, ns, new, new_task, path, idx, channel, type_, blob))
        self.counts = [len(self.checkpoints), len(self.writes), 0]

    def insert_into(self, conn: Any) -> None:
        """``executemany`` everything added (inside the caller's transaction)."""
        conn.executemany(self.CHECKPOINT_SQL, self.checkpoints)
        conn.executemany(self.WRITE_SQL, self.writes)


def _chunks(rows: list[bytes], size: int) -> Iterable[list[bytes]]:
    for i in range(0, len(rows), size):
        yield rows[i:i + size]
