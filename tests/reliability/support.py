"""Helpers for the reliability tests: cheap private copies of the real fixture, fingerprints of every
thread, and the invariant checker ("untouched or completely converted and verified, never partial").

Copies: a pristine copy per backend is made once (SQLite: the fixture file after LangGraph's own
``setup()`` migration, WAL folded back into the file; Postgres: the dump restored into a database),
and every trial works on a copy of it (SQLite: a file copy; Postgres: ``CREATE DATABASE ... TEMPLATE``).

Fingerprints: one digest per (table, thread) over the thread's rows in a stable order, byte for
byte (Postgres computes them server-side: ``md5`` of each row's text form, JSONB as its text, bytea
as hex). The checker classifies each thread against the pristine fingerprints:

* ``untouched``: every table's rows identical to the original, and no backup of the thread;
* ``converted``: the same checkpoint ids and parent links, no checkpoint carries delta metadata
  (DeerFlow's marker, LangGraph's ``messages`` counter), a full-mode accessor reads every checkpoint of
  every namespace with the manifest's digest, pending writes (and, on Postgres, every blob of another
  channel) identical to the original, and exactly one active backup whose rows are the original rows;
* ``partial``: anything else (the problems are listed).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.digest import messages_sha256
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, COUNTERS_METADATA_KEY
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests import fixtures_real
from tests.deerflow.convert.support import config_for, open_saver

#: Mid-size delta threads of the real fixture: plain chains (f10 and f3 cadence), a subgraph namespace,
#: a full-then-delta thread, a fork, and a thread written without DeerFlow's marker.
THREADS = ["delta-f10-50t", "delta-f3-40t", "delta-f10-subgraph", "migrated-full20-delta20", "delta-f10-fork",
           "markerless-delta-f10-13t"]

# -- copies --------------------------------------------------------------------


@dataclass
class Pristine:
    """The untouched fixture on one backend, its fingerprints, and how to copy it."""

    backend: str
    database: DatabaseConfig
    fingerprints: dict[str, dict[str, str]]
    pg_name: str | None = None

    @property
    def threads(self) -> list[str]:
        return sorted(self.fingerprints["checkpoints"])


def make_pristine(backend: str, directory: Path) -> Pristine:
    """Restore the fixture once (SQLite under ``directory``); the caller drops it with :func:`drop_pristine`."""
    if backend == "sqlite":
        fixtures_real.restore_sqlite(directory)
        database = DatabaseConfig(backend="sqlite", sqlite_dir=str(directory))
        with open_saver(database):  # LangGraph's setup() migration (writes.task_path), as every saver does
            pass
        with closing(sqlite3.connect(str(database.sqlite_path()))) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return Pristine(backend, database, fingerprints(database))
    name, url = fixtures_real.create_fixture_database("dfa_reliability")
    database = DatabaseConfig(backend="postgres", postgres_url=url)
    return Pristine(backend, database, fingerprints(database), pg_name=name)


def drop_pristine(pristine: Pristine) -> None:
    if pristine.pg_name:
        fixtures_real.drop_database(pristine.pg_name)


def copy_database(pristine: Pristine, directory: Path) -> DatabaseConfig:
    """A private writable copy of the pristine database (SQLite: under ``directory``)."""
    if pristine.backend == "sqlite":
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pristine.database.sqlite_path(), directory / "deerflow.db")
        return DatabaseConfig(backend="sqlite", sqlite_dir=str(directory))
    name = f"{pristine.pg_name}_c{uuid.uuid4().hex[:8]}"
    with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pristine.pg_name}"')
    return DatabaseConfig(backend="postgres", postgres_url=f"postgresql://postgres@127.0.0.1:5432/{name}")


def drop_copy(database: DatabaseConfig) -> None:
    if database.backend == "sqlite":
        shutil.rmtree(database.sqlite_dir, ignore_errors=True)
        return
    fixtures_real.drop_database(psycopg.conninfo.conninfo_to_dict(database.postgres_url)["dbname"])


@contextmanager
def private_copy(pristine: Pristine, directory: Path) -> Iterator[DatabaseConfig]:
    database = copy_database(pristine, directory)
    try:
        yield database
    finally:
        drop_copy(database)


# -- fingerprints ----------------------------------------------------------------

_SQLITE_TABLES = {
    "checkpoints": "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
                   "FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
    "writes": "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path "
              "FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
}
_PG_ROW = "md5(string_agg(md5(row({cols})::text), '' ORDER BY {order}))"
_PG_TABLES = {
    "checkpoints": ("checkpoints", "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata",
                    "checkpoint_ns, checkpoint_id", ""),
    "writes": ("checkpoint_writes", "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path",
               "checkpoint_ns, checkpoint_id, task_id, idx", ""),
    "blobs_messages": ("checkpoint_blobs", "checkpoint_ns, channel, version, type, blob",
                       "checkpoint_ns, channel, version", "WHERE channel = 'messages'"),
    "blobs_other": ("checkpoint_blobs", "checkpoint_ns, channel, version, type, blob",
                    "checkpoint_ns, channel, version", "WHERE channel <> 'messages'"),
}


def _sqlite_digests(conn: sqlite3.Connection, query: str, params: tuple = ()) -> dict[str, str]:
    out: dict[str, Any] = {}
    for row in conn.execute(query, params):
        h = out.get(row[0])
        if h is None:
            h = out[row[0]] = hashlib.sha256()
        h.update(repr(row[1:]).encode("utf-8"))
        h.update(b"\x00")
    return {k: h.hexdigest() for k, h in out.items()}


def fingerprints(database: DatabaseConfig, threads: list[str] | None = None) -> dict[str, dict[str, str]]:
    """``{table: {thread_id: digest}}`` over every row of LangGraph's tables (see the module docstring);
    only ``threads`` when given."""
    if database.backend == "sqlite":
        where, params = ("", ()) if threads is None else (f"WHERE thread_id IN ({','.join('?' * len(threads))}) ",
                                                          tuple(threads))
        with closing(sqlite3.connect(str(database.sqlite_path()), timeout=60)) as conn:
            return {table: _sqlite_digests(conn, query.replace("ORDER BY", where + "ORDER BY"), params)
                    for table, query in _SQLITE_TABLES.items()}
    out = {}
    with psycopg.connect(database.postgres_url, autocommit=True) as conn:
        for key, (table, cols, order, where) in _PG_TABLES.items():
            if threads is not None:
                where = (where + " AND" if where else "WHERE") + " thread_id = ANY(%s)"
            rows = conn.execute(f"SELECT thread_id, {_PG_ROW.format(cols=cols, order=order)} FROM {table} {where} "
                                "GROUP BY thread_id", () if threads is None else (threads,)).fetchall()
            out[key] = dict(rows)
    return out


def backups_by_thread(database: DatabaseConfig) -> dict[str, list[dict[str, Any]]]:
    """``{thread_id: [dfa_backups row + digests of its backed-up rows]}`` (``{}`` without the table)."""
    out: dict[str, list[dict[str, Any]]] = {}
    if database.backend == "sqlite":
        with closing(sqlite3.connect(str(database.sqlite_path()), timeout=60)) as conn:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'dfa_backups'").fetchall():
                return out
            for backup_id, thread_id, status, n, note in conn.execute(
                    "SELECT backup_id, thread_id, status, checkpoint_rows, note FROM dfa_backups").fetchall():
                digest = _sqlite_digests(conn, "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
                                         "type, checkpoint, metadata FROM dfa_backup_checkpoints WHERE backup_id = ? "
                                         "ORDER BY checkpoint_ns, checkpoint_id", (backup_id,))
                out.setdefault(thread_id, []).append({"backup_id": backup_id, "status": status, "checkpoint_rows": n,
                                                      "note": note, "checkpoints": digest.get(thread_id)})
            return out
    with psycopg.connect(database.postgres_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_tables WHERE tablename = 'dfa_backups'").fetchall():
            return out
        for backup_id, thread_id, status, n, note in conn.execute(
                "SELECT backup_id, thread_id, status, checkpoint_rows, note FROM dfa_backups").fetchall():
            cols, order = _PG_TABLES["checkpoints"][1:3]
            (cp,) = conn.execute(f"SELECT {_PG_ROW.format(cols=cols, order=order)} FROM dfa_backup_checkpoints "
                                 "WHERE backup_id = %s", (backup_id,)).fetchone()
            cols, order = _PG_TABLES["blobs_messages"][1:3]
            (bl,) = conn.execute(f"SELECT {_PG_ROW.format(cols=cols, order=order)} FROM dfa_backup_blobs "
                                 "WHERE backup_id = %s", (backup_id,)).fetchone()
            out.setdefault(thread_id, []).append({"backup_id": backup_id, "status": status, "checkpoint_rows": n,
                                                  "note": note, "checkpoints": cp, "blobs_messages": bl})
    return out


# -- the invariant checker --------------------------------------------------------------


def manifest_checkpoints(manifest: dict[str, Any], backend: str, thread_id: str) -> dict[tuple[str, str], dict]:
    """``{(ns, checkpoint_id): manifest entry}`` of one thread on one backend."""
    thread = next(t for t in manifest["threads"] if t["thread_id"] == thread_id)
    return {(c["checkpoint_ns"], c["checkpoint_id"]): c for c in thread["backends"][backend]["checkpoints"]}


def _stored(database: DatabaseConfig, thread_id: str) -> list[tuple[str, str, str | None, Any]]:
    """``(ns, checkpoint_id, parent_checkpoint_id, metadata)`` of every stored checkpoint of the thread."""
    query = "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints WHERE thread_id = "
    if database.backend == "sqlite":
        with closing(sqlite3.connect(str(database.sqlite_path()), timeout=60)) as conn:
            return conn.execute(query + "?", (thread_id,)).fetchall()
    with psycopg.connect(database.postgres_url, autocommit=True) as conn:
        return conn.execute(query + "%s", (thread_id,)).fetchall()


def conversion_problems(database: DatabaseConfig, pristine: Pristine, manifest: dict[str, Any], thread_id: str,
                        now: dict[str, dict[str, str]], backups: list[dict[str, Any]]) -> list[str]:
    """Why ``thread_id`` is not completely converted and verified (``[]``: it is)."""
    problems: list[str] = []
    expected = manifest_checkpoints(manifest, pristine.backend, thread_id)
    links = {(ns, cid, e["parent_checkpoint_id"]) for (ns, cid), e in expected.items()}
    stored = _stored(database, thread_id)
    if {r[:3] for r in stored} != links:
        problems.append(f"checkpoint ids or parent links changed: {len({r[:3] for r in stored} ^ links)} differ")
    for ns, cid, _parent, metadata in stored:
        meta = metadata_of(metadata)
        if CHECKPOINT_MODE_METADATA_KEY in meta or "messages" in (meta.get(COUNTERS_METADATA_KEY) or {}):
            problems.append(f"{ns!r}/{cid}: delta metadata left")
    for table in ("writes", "blobs_other"):
        if table in now and now[table].get(thread_id) != pristine.fingerprints[table].get(thread_id):
            problems.append(f"{table} rows changed (conversion must not touch them)")
    read: dict[tuple[str, str], str] = {}
    with open_saver(database) as saver:
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        for ns in sorted({ns for ns, _ in expected}, key=lambda n: (n != "", n)):
            try:
                for snapshot in full.iter_history(config_for(thread_id, ns=ns)):
                    read[(ns, snapshot.config["configurable"]["checkpoint_id"])] = messages_sha256(
                        snapshot.values.get("messages") or [])
            except Exception as exc:  # noqa: BLE001 - a full-mode reader failure is the finding
                problems.append(f"full-mode accessor cannot read namespace {ns!r}: {type(exc).__name__}: {exc}")
    wrong = [k for k, e in expected.items() if read.get(k) != e["messages_sha256"]]
    if wrong:
        problems.append(f"{len(wrong)} of {len(expected)} checkpoints read differently in full mode, e.g. {wrong[0]}")
    active = [b for b in backups if b["status"] == "active"]
    if len(active) != 1:
        problems.append(f"expected exactly one active backup, found {[(b['backup_id'], b['status']) for b in backups]}")
    for b in active:
        if b["checkpoints"] != pristine.fingerprints["checkpoints"][thread_id]:
            problems.append(f"backup {b['backup_id']} does not hold the original checkpoint rows")
        if "blobs_messages" in b and b["blobs_messages"] != pristine.fingerprints["blobs_messages"].get(thread_id):
            problems.append(f"backup {b['backup_id']} does not hold the original messages blobs")
    return problems


def classify(database: DatabaseConfig, pristine: Pristine, manifest: dict[str, Any],
             now: dict[str, dict[str, str]] | None = None,
             threads: list[str] | None = None) -> dict[str, tuple[str, list[str]]]:
    """``{thread_id: (verdict, problems)}`` for every thread of the database, or only ``threads``
    (see the module docstring)."""
    now = now if now is not None else fingerprints(database, threads)
    backups = backups_by_thread(database)
    out: dict[str, tuple[str, list[str]]] = {}
    everything = set(pristine.threads) | set(now["checkpoints"]) | set(backups)
    for thread_id in sorted(everything if threads is None else set(threads)):
        same = all(now[t].get(thread_id) == pristine.fingerprints[t].get(thread_id) for t in now)
        if same and not backups.get(thread_id):
            out[thread_id] = ("untouched", [])
            continue
        if thread_id not in pristine.fingerprints["checkpoints"]:
            out[thread_id] = ("partial", ["a thread that was not in the original database"])
            continue
        problems = conversion_problems(database, pristine, manifest, thread_id, now, backups.get(thread_id, []))
        if same:
            problems.append("rows identical to the original but a backup exists")
        out[thread_id] = ("partial", problems) if problems else ("converted", [])
    return out


def metadata_of(row_metadata: Any) -> dict[str, Any]:
    """A stored ``metadata`` column (SQLite bytes / Postgres text) as a dict."""
    if isinstance(row_metadata, bytes | bytearray | memoryview):
        row_metadata = bytes(row_metadata).decode("utf-8")
    return json.loads(row_metadata) if isinstance(row_metadata, str) else dict(row_metadata or {})
