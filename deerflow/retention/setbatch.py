"""Keep-last of many Postgres threads in one transaction: one statement deletes (and backs up) the whole batch.

A thread is pruned here when nothing it keeps needs a new value: every kept
checkpoint then reads as before exactly when the bytes it reads are
unchanged. That holds when each *chain start* (a kept checkpoint whose
parent goes) reads only its own rows, which LangGraph's reader does
(``channels_from_checkpoint``) when

* for each channel it rebuilds from ancestors (:func:`~deerflow.retention.reading.replayed_channels`)
  that the chain start has a version of, the chain start stores a value:
  a blob of that version that is not the saver's ``empty`` or ``null``
  marker, or an inline value that is not ``null``;
* no deleted checkpoint of its namespace has a version of, or a writes row
  for, such a channel the chain start has no version of (a reading of a
  kept checkpoint below would otherwise walk past the chain start into the
  deleted rows).

A kept checkpoint below a chain start reads its own rows, the writes rows of
its kept ancestors and at most the chain start's stored values: all kept
bytes. So the proof is the kept checkpoints' stored bytes (rows without the
parent link, the blobs they name, their writes rows), digested before and
after (:func:`_verify`, from :func:`deerflow.retention.batchcheck.read_after`), with no reading
through LangGraph's reader and no value decoded.

The transaction is ``REPEATABLE READ`` (as LangGraph's own ``prune``): the
plan and the deletes read one snapshot, so what a run saves meanwhile is
neither seen nor deleted, and a row changed meanwhile fails the statement.
One statement per batch deletes every checkpoint the plans do not keep, their
writes rows and the blobs only they used (LangGraph ``prune``'s rule), and
clears the chain starts' parent links; with a backup it moves the deleted
rows into each thread's own backup and copies the kept rows beside them, so
each backup is its whole thread as :func:`deerflow.convert.backups.restore_rows`
expects (a revert is byte-identical).

A thread this path does not prove (a chain start to rebase, a parent link
that does not resolve, a namespace head that goes) is left to the caller,
and so is the whole batch when a check fails or the statement does: the
caller prunes those threads one by one (:func:`deerflow.retention.prune.prune_thread`).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

from deerflow.convert import backups
from deerflow.errors import StorageError
from deerflow.retention.batchcheck import After, BatchRollback, read_after
from deerflow.retention.batchfacts import read_batch_nodes
from deerflow.retention.plan import Node, Plan, plan_keep_last
from deerflow.retention.report import PruneReport
from deerflow.retention.setbased import (
    backup_tables_committed,
    backup_tables_known,
    chain_starts_on_own_rows,
    kept_bytes_digests,
    key_columns,
)

__all__ = ["BATCH_THREADS", "keep_last_in_batches"]

_Key = tuple[str, str]

#: Threads per transaction: a failed check sends this many threads to the per-thread path.
BATCH_THREADS = 25

_CHECKPOINT_COLS = ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type", "checkpoint",
                    "metadata")
_BLOB_COLS = ("thread_id", "checkpoint_ns", "channel", "version", "type", "blob")
_KEY = "thread_id, checkpoint_ns, checkpoint_id"


def keep_last_in_batches(shared: Any, thread_ids: list[str], n: int, *, protect: set[str], backup: bool,
                         note: str) -> dict[str, PruneReport]:
    """Keep-last ``n`` prune of the threads this path proves, :data:`BATCH_THREADS` to a transaction.

    Args:
        shared: a :class:`deerflow.retention.batch.SharedConnection` (Postgres).
        thread_ids: the threads asked for.
        n: checkpoints kept on each namespace head's chain (>= 1).
        protect: checkpoint ids kept whatever the rule (explicit resume targets).
        backup: move the deleted rows into a whole-thread backup per thread (its id on the report).
        note: stored with each backup (``prune:keep_last`` when empty).

    Returns:
        ``{thread_id: report}`` (``pruned``, or ``nothing_to_prune`` for a thread the plan deletes nothing of)
        of the threads pruned and committed here; the others are the caller's.
    """
    reports: dict[str, PruneReport] = {}
    for i in range(0, len(thread_ids), BATCH_THREADS):
        chunk = sorted(thread_ids[i:i + BATCH_THREADS])
        started = time.monotonic()
        try:
            with shared.session(write=True, repeatable_read=True) as session:
                done = _prune(session, chunk, n, protect, backup, note or "prune:keep_last")
        except (StorageError, BatchRollback):
            continue
        except Exception as exc:  # a psycopg error of the statement (e.g. a serialization failure)
            if type(exc).__module__.startswith("psycopg"):
                continue
            raise
        for report in done.values():
            report.duration_s = round((time.monotonic() - started) / len(chunk), 3)
        reports.update(done)
    return reports


def _prune(session: Any, thread_ids: list[str], n: int, protect: set[str], backup: bool,
           note: str) -> dict[str, PruneReport]:
    # each thread's lock (as a single thread's prune takes it); no parallel workers: this transaction's statements
    # read a few thousand rows, which a worker's start-up costs more than it saves
    session.query("SELECT set_config('max_parallel_workers_per_gather', '0', true), "
                  "pg_advisory_xact_lock(hashtextextended('dfa.convert:' || t, 0)) FROM unnest(?::text[]) AS t "
                  "ORDER BY t", [thread_ids])
    plans: dict[str, Plan] = {}
    unchanged: dict[str, Plan] = {}
    for t, nodes in read_batch_nodes(session, thread_ids).items():
        plan = _plan(nodes, n, protect)
        if plan is not None:
            (plans if plan.deleted else unchanged)[t] = plan
    on_own_rows = chain_starts_on_own_rows(session, plans)
    chosen = sorted(t for t, plan in plans.items() if all((t, *k) in on_own_rows for k in plan.chain_starts))
    stored = _stored_bytes(session, chosen) if chosen else {}
    kept = {t: plans[t].kept for t in chosen}
    digest = kept_bytes_digests(session, kept) if chosen else {}
    backup_ids = {t: f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}" for t in chosen} \
        if backup else {}
    counts = _delete(session, chosen, plans, backup_ids) if chosen else {}
    after = read_after(session, [*chosen, *unchanged])
    for t in chosen:
        if counts.get(("d", t), 0) != len(plans[t].deleted):
            raise BatchRollback(t)  # not the planned rows: changed since the plan's snapshot
    _verify(session, plans, kept, after, digest)
    if backup_ids:
        _record_backups(session, chosen, backup_ids, counts, stored, note)
    session.commit()
    if backup_ids:
        backup_tables_committed(session)
    reports = {t: _report(t, plan, "nothing_to_prune", after[t].stored_bytes, after[t].stored_bytes)
               for t, plan in unchanged.items()}
    for t in chosen:
        reports[t] = _report(t, plans[t], "pruned", stored[t],
                             after[t].stored_bytes)
        reports[t].backup_id = backup_ids.get(t)
    return reports


def _plan(nodes: list[Node] | None, n: int, protect: set[str]) -> Plan | None:
    """The thread's keep-last plan when this path can do it: every parent link resolves and every namespace keeps
    its head (a subgraph call's namespace deleted whole changes the heads: the per-thread path checks it)."""
    if not nodes:
        return None
    plan = plan_keep_last(nodes, n, protect)
    return None if plan.deleted_namespaces else plan


def _verify(session: Any, plans: dict[str, Plan], kept: dict[str, set[_Key]], after: dict[str, After],
            digest: dict[str, str]) -> None:
    """Before commit: exactly the planned checkpoints left, the kept ones' stored bytes unchanged, no writes row of
    a deleted checkpoint and no blob that no kept checkpoint references (a thread that had such a blob before is
    left to the per-thread path: the batch rolls back)."""
    now = kept_bytes_digests(session, kept) if kept else {}
    for t, plan in plans.items():
        if t not in kept:
            continue
        if after[t].left != plan.kept or after[t].orphan_writes & plan.deleted or after[t].unreferenced_blobs \
                or now[t] != digest[t]:
            raise BatchRollback(t)


def _stored_bytes(session: Any, thread_ids: list[str]) -> dict[str, int]:
    """``{thread_id: bytes in LangGraph's three tables}`` (as the thread summary counts them), one statement."""
    d = session.dialect
    stored = dict.fromkeys(thread_ids, 0)
    for r in session.query(
            f"SELECT thread_id, SUM({d.checkpoint_bytes(None)}) AS b FROM checkpoints WHERE thread_id = ANY(?) "
            f"GROUP BY thread_id UNION ALL SELECT thread_id, SUM({d.write_bytes(None)}) FROM {d.writes_table} "
            f"WHERE thread_id = ANY(?) GROUP BY thread_id UNION ALL SELECT thread_id, SUM({d.blob_bytes()}) "
            "FROM checkpoint_blobs WHERE thread_id = ANY(?) GROUP BY thread_id", [thread_ids] * 3):
        stored[r["thread_id"]] += int(r["b"] or 0)
    return stored


def _delete(session: Any, thread_ids: list[str], plans: dict[str, Plan],
            backup_ids: dict[str, str]) -> dict[tuple[str, str], int]:
    """One statement: every checkpoint of ``thread_ids`` not kept, its writes rows, the blobs no kept checkpoint
    names; the chain starts' parent links cleared. With ``backup_ids`` (``{thread_id: backup id}``) the deleted rows
    move into the backup tables and the rest of each thread is copied beside them, as it was.

    Returns:
        ``{(what, thread_id): rows}``: ``d`` checkpoints deleted, ``p`` parent links cleared, with a backup
        ``bc``, ``bw``, ``bb`` the checkpoint, writes and blob rows in the thread's backup.
    """
    d = session.dialect
    writes = d.writes_table
    write_cols = tuple(c.strip() for c in session.dialect.write_columns.split(","))
    kept = sorted((t, *k) for t in thread_ids for k in plans[t].kept)
    starts = sorted((t, *k) for t in thread_ids for k in plans[t].chain_starts)
    sql = [
        "WITH k AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]) AS k(thread_id, checkpoint_ns, "
        "checkpoint_id)), ",
        f"d AS (DELETE FROM checkpoints WHERE thread_id = ANY(?) AND ({_KEY}) NOT IN (SELECT {_KEY} FROM k) "
        f"RETURNING {', '.join(_CHECKPOINT_COLS) if backup_ids else _KEY}), ",
        f"w AS (DELETE FROM {writes} x USING d WHERE x.thread_id = d.thread_id AND x.checkpoint_ns = d.checkpoint_ns "
        "AND x.checkpoint_id = d.checkpoint_id RETURNING "
        f"{', '.join('x.' + c for c in write_cols) if backup_ids else 'x.thread_id'}), ",
        # the batch's blobs no kept checkpoint names (garbage_blobs' rule)
        "g AS (SELECT thread_id, checkpoint_ns, channel, version FROM checkpoint_blobs WHERE thread_id = ANY(?) "
        "EXCEPT SELECT c.thread_id, c.checkpoint_ns, v.key, v.value FROM checkpoints c "
        "JOIN k USING (thread_id, checkpoint_ns, checkpoint_id) CROSS JOIN LATERAL "
        "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v), ",
        "b AS (DELETE FROM checkpoint_blobs x USING g WHERE x.thread_id = g.thread_id AND x.checkpoint_ns = "
        f"g.checkpoint_ns AND x.channel = g.channel AND x.version = g.version RETURNING "
        f"{', '.join('x.' + c for c in _BLOB_COLS) if backup_ids else 'x.thread_id'}), ",
        f"p AS (UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE ({_KEY}) IN "
        "(SELECT * FROM unnest(?::text[], ?::text[], ?::text[])) RETURNING thread_id)",
    ]
    params: list[Any] = [*key_columns(kept), thread_ids, thread_ids, *key_columns(starts)]
    counts = ["SELECT 'd' AS what, thread_id, COUNT(*) AS n FROM d GROUP BY thread_id",
              "SELECT 'p', thread_id, COUNT(*) FROM p GROUP BY thread_id"]
    if backup_ids:
        if not backup_tables_known(session):
            backups.ensure_whole_thread_tables(session)
        sql.append(", m AS (SELECT * FROM unnest(?::text[], ?::text[]) AS m(thread_id, backup_id))")
        params += [list(backup_ids), list(backup_ids.values())]
        sql.append(_move("bc", "dfa_backup_checkpoints", "checkpoints", _CHECKPOINT_COLS, "d",
                         "JOIN k USING (thread_id, checkpoint_ns, checkpoint_id)"))
        sql.append(_move("bw", "dfa_backup_writes", writes, write_cols, "w",
                         "WHERE NOT EXISTS (SELECT 1 FROM d WHERE d.thread_id = x.thread_id AND d.checkpoint_ns = "
                         "x.checkpoint_ns AND d.checkpoint_id = x.checkpoint_id)"))
        sql.append(_move("bb", "dfa_backup_blobs", "checkpoint_blobs", _BLOB_COLS, "b",
                         "WHERE NOT EXISTS (SELECT 1 FROM g WHERE g.thread_id = x.thread_id AND g.checkpoint_ns = "
                         "x.checkpoint_ns AND g.channel = x.channel AND g.version = x.version)"))
        counts += [f"SELECT '{c}', m.thread_id, COUNT(*) FROM {c} JOIN m USING (backup_id) "
                   "GROUP BY m.thread_id" for c in ("bc", "bw", "bb")]
    rows = session.query("".join(sql) + " " + " UNION ALL ".join(counts), params)
    return {(r["what"], r["thread_id"]): int(r["n"]) for r in rows}


def _move(name: str, into: str, table: str, cols: tuple[str, ...], moved: str, kept_rows: str) -> str:
    """The CTE that inserts into ``into`` each thread's ``moved`` rows (a deleting CTE's) and the rows of ``table``
    left (``kept_rows``: a join or a ``WHERE`` on ``x``), under the thread's backup id; returns the backup ids."""
    listed = ", ".join(cols)
    return (f", {name} AS (INSERT INTO {into} (backup_id, {listed}) "
            f"SELECT m.backup_id, {', '.join(moved + '.' + c for c in cols)} FROM {moved} JOIN m USING (thread_id) "
            f"UNION ALL SELECT m.backup_id, {', '.join('x.' + c for c in cols)} FROM {table} x "
            f"JOIN m USING (thread_id) {kept_rows} "
            "RETURNING backup_id)")


def _record_backups(session: Any, thread_ids: list[str], backup_ids: dict[str, str],
                    counts: dict[tuple[str, str], int], stored: dict[str, int], note: str) -> None:
    """Each thread's ``dfa_backups`` record (whole-thread scope), as a single thread's prune records it."""
    created = dt.datetime.now(dt.UTC).isoformat()
    session.execute(
        "WITH r AS (INSERT INTO dfa_backups (backup_id, thread_id, created_at, checkpoint_rows, blob_rows, bytes, "
        "status, note) SELECT backup_id, thread_id, ?, checkpoint_rows, blob_rows, bytes, 'active', ? FROM "
        "unnest(?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::bigint[]) AS r(backup_id, thread_id, "
        "checkpoint_rows, blob_rows, bytes) RETURNING backup_id) "
        "INSERT INTO dfa_backup_scopes (backup_id, scope) SELECT backup_id, 'thread' FROM r",
        [created, note, [backup_ids[t] for t in thread_ids], thread_ids,
         [counts.get(("bc", t), 0) for t in thread_ids],
         [counts.get(("bw", t), 0) + counts.get(("bb", t), 0) for t in thread_ids],
         [stored[t] for t in thread_ids]])


def _report(thread_id: str, plan: Plan, status: str, before: int, after: int) -> PruneReport:
    report = PruneReport(thread_id=thread_id, rule="keep_last", attempts=1, status=status, bytes_before=before,
                         bytes_after=after)
    report.describe(plan, [])
    return report
