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
through LangGraph's reader and no value decoded. The first condition is
checked before the deletes (:func:`~deerflow.retention.proof.chain_starts_storing`);
the deleting statement itself reads the second (the replayed channels of the
writes rows it deletes) and the digest before, on the snapshot before its
changes; a batch where a reading would walk past a chain start is rolled back
and run again without that thread.

A call's batches run :data:`LANES` at a time, each transaction on its own
connection (:func:`batches_of`): a batch's statements run in one server
process, so two keep two cores busy. Each batch is atomic on its own.

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
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from deerflow.convert import backups
from deerflow.errors import StorageError
from deerflow.retention.batchcheck import After, BatchRollback, read_after
from deerflow.retention.batchfacts import read_batch_forests
from deerflow.retention.plan import Forest, Plan, plan_keep_last
from deerflow.retention.proof import chain_starts_storing, kept_digest_sql, walks_past
from deerflow.retention.reading import replayed_channels
from deerflow.retention.report import PruneReport
from deerflow.retention.setbased import backup_tables_committed, backup_tables_known, key_columns

__all__ = ["BATCH_THREADS", "LANES", "LANE_THREADS", "batches_of", "keep_last_in_batches"]

_Key = tuple[str, str]

#: Threads per transaction: a failed check sends this many threads to the per-thread path.
BATCH_THREADS = 25

#: Transactions at once, each on its own connection: a batch's statements run in one server process, so a
#: second connection keeps a second core busy (and the server busy while the client plans).
LANES = 2

#: Fewest threads a lane's batch takes: a transaction costs about 10 ms whatever its size (the lock, six
#: statements, the commit), worth paying twice only for this many threads or more.
LANE_THREADS = 3

_CHECKPOINT_COLS = ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type", "checkpoint",
                    "metadata")
_BLOB_COLS = ("thread_id", "checkpoint_ns", "channel", "version", "type", "blob")
_KEY = "thread_id, checkpoint_ns, checkpoint_id"
_BLOB_KEY = "thread_id, checkpoint_ns, channel, version"


def keep_last_in_batches(shared: Any, thread_ids: list[str], n: int, *, protect: set[str], backup: bool,
                         note: str) -> dict[str, PruneReport]:
    """Keep-last ``n`` prune of the threads this path proves, in the batches of :func:`batches_of` (at most
    :data:`BATCH_THREADS` threads a transaction, :data:`LANES` transactions at once).

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
    chunks = batches_of(thread_ids)
    note = note or "prune:keep_last"
    stop = threading.Event()
    if backup and chunks and not _ensure_backup_tables(shared):
        return {}  # the backup tables could not be made: each thread goes alone, and reports why
    if len(chunks) < 2:
        return _lane(shared, chunks, n, protect, backup, note, stop)
    reports: dict[str, PruneReport] = {}
    lanes = min(LANES, len(chunks))
    with ExitStack() as stack:
        conns = [shared, *(stack.enter_context(type(shared)(shared.database)) for _ in range(lanes - 1))]
        pool = stack.enter_context(ThreadPoolExecutor(lanes))
        futures = [pool.submit(_lane, conn, chunks[i::lanes], n, protect, backup, note, stop)
                   for i, conn in enumerate(conns)]
        try:
            for future in as_completed(futures):
                reports.update(future.result())
        except BaseException:
            stop.set()  # an error or Ctrl-C: the other lanes finish the batch they are in and take no other
            raise
    return reports


def batches_of(thread_ids: list[str]) -> list[list[str]]:
    """The transactions :func:`keep_last_in_batches` prunes ``thread_ids`` in, in order: as many as
    :data:`LANES` (fewer when a lane would get under :data:`LANE_THREADS` threads) or more, of equal sizes and at
    most :data:`BATCH_THREADS` threads each; each batch's ids sorted (the order its locks are taken in).

    Example: 5 threads are one batch, 10 are two of 5, 60 are 25, 25 and 10."""
    lanes = max(1, min(LANES, len(thread_ids) // LANE_THREADS))
    size = max(1, min(BATCH_THREADS, -(-len(thread_ids) // lanes)))
    return [sorted(thread_ids[i:i + size]) for i in range(0, len(thread_ids), size)]


def _ensure_backup_tables(shared: Any) -> bool:
    """Create the whole-thread backup tables if missing, committed, once before any batch (two transactions could
    both create them; skipped on a connection that already has); False when that failed (e.g. no ``CREATE``
    privilege, or another process creating them at the same moment)."""
    try:
        with shared.session(write=True) as session:
            if not backup_tables_known(session):
                backups.ensure_whole_thread_tables(session)
                session.commit()
                backup_tables_committed(session)
    except StorageError:
        return False
    return True


def _lane(shared: Any, chunks: list[list[str]], n: int, protect: set[str], backup: bool, note: str,
          stop: threading.Event) -> dict[str, PruneReport]:
    """Prune ``chunks`` one after another on ``shared``'s connection (one transaction each), until ``stop``."""
    reports: dict[str, PruneReport] = {}
    for chunk in chunks:
        if stop.is_set():
            break
        for _attempt in range(2):  # a second time without the threads the deleting statement did not prove
            started = time.monotonic()
            try:
                with shared.session(write=True, repeatable_read=True) as session:
                    done, unproven = _prune(session, chunk, n, protect, backup, note)
            except (StorageError, BatchRollback):
                break
            except Exception as exc:  # a psycopg error of the statement (e.g. a serialization failure)
                if type(exc).__module__.startswith("psycopg"):
                    break
                raise
            if unproven:
                chunk = [t for t in chunk if t not in unproven]
                continue
            for report in done.values():
                report.duration_s = round((time.monotonic() - started) / len(chunk), 3)
            reports.update(done)
            break
    return reports


def _prune(session: Any, thread_ids: list[str], n: int, protect: set[str], backup: bool,
           note: str) -> tuple[dict[str, PruneReport], set[str]]:
    """One batch's transaction: ``(reports, set())`` committed, or ``({}, threads)`` not committed when the
    deleting statement found that a reading would walk past the chain starts of ``threads`` (the caller retries
    without them)."""
    # each thread's lock (as a single thread's prune takes it); no parallel workers and no JIT compilation: this
    # transaction's statements read a few thousand rows, which a worker's start-up or a compilation costs more than
    session.query("SELECT set_config('max_parallel_workers_per_gather', '0', true), set_config('jit', 'off', true), "
                  "pg_advisory_xact_lock(hashtextextended('dfa.convert:' || t, 0)) FROM unnest(?::text[]) AS t "
                  "ORDER BY t", [thread_ids])
    plans: dict[str, Plan] = {}
    unchanged: dict[str, Plan] = {}
    for t, forest in read_batch_forests(session, thread_ids).items():
        plan = _plan(forest, n, protect)
        if plan is not None:
            (plans if plan.deleted else unchanged)[t] = plan
    storing = chain_starts_storing(session, plans)
    replayed = replayed_channels()
    chosen = sorted(t for t, plan in plans.items() if all((t, *k) in storing for k in plan.chain_starts))
    backup_ids = {t: f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}" for t in chosen} \
        if backup else {}
    unversioned = {c for k, channels in storing.items() if k[0] in chosen for c in replayed - channels}
    done = _delete(session, chosen, plans, backup_ids, unversioned) if chosen else _Deleted()
    unproven = {k[0] for k in walks_past({k: v for k, v in storing.items() if k[0] in chosen}, done.written)}
    if unproven:
        return {}, unproven
    after = read_after(session, {t: plans[t].kept for t in chosen} | {t: set() for t in unchanged})
    for t in chosen:
        if done.counts.get(("d", t), 0) != len(plans[t].deleted):
            raise BatchRollback(t)  # not the planned rows: changed since the plan's snapshot
    _verify({t: plans[t] for t in chosen}, after, done.digest)
    stored = {t: after[t].stored_bytes + done.deleted_bytes.get(t, 0) for t in chosen}
    if backup_ids:
        _record_backups(session, chosen, backup_ids, done.counts, stored, note)
    session.commit()
    reports = {t: _report(t, plan, "nothing_to_prune", after[t].stored_bytes, after[t].stored_bytes)
               for t, plan in unchanged.items()}
    for t in chosen:
        reports[t] = _report(t, plans[t], "pruned", stored[t], after[t].stored_bytes)
        reports[t].backup_id = backup_ids.get(t)
    return reports, set()


def _plan(forest: Forest | None, n: int, protect: set[str]) -> Plan | None:
    """The thread's keep-last plan when this path can do it: every parent link resolves and every namespace keeps
    its head (a subgraph call's namespace deleted whole changes the heads: the per-thread path checks it)."""
    if forest is None:
        return None
    plan = plan_keep_last(forest, n, protect)
    return None if plan.deleted_namespaces else plan


def _verify(plans: dict[str, Plan], after: dict[str, After], digest: dict[str, str]) -> None:
    """Before commit: exactly the planned checkpoints left, the kept ones' stored bytes unchanged (``digest``
    before), no writes row of a deleted checkpoint and no blob that no kept checkpoint references (a thread that
    had such a blob before is left to the per-thread path: the batch rolls back)."""
    for t, plan in plans.items():
        if after[t].left != plan.kept or after[t].orphan_writes & plan.deleted or after[t].unreferenced_blobs \
                or after[t].kept_digest != digest.get(t, ""):
            raise BatchRollback(t)


@dataclass
class _Deleted:
    """What the deleting statement reports: ``counts`` ``{(what, thread_id): rows}`` (``d`` checkpoints deleted,
    ``p`` parent links cleared, with a backup ``bc``, ``bw``, ``bb`` the rows in each backup), ``deleted_bytes``
    ``{thread_id: bytes of the rows deleted}``, ``written`` ``{(thread_id, checkpoint_ns): replayed channels of
    the writes rows deleted}`` and ``digest`` ``{thread_id: the kept rows' digest before}``
    (:func:`~deerflow.retention.proof.kept_digest_sql`)."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    deleted_bytes: dict[str, int] = field(default_factory=dict)
    written: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    digest: dict[str, str] = field(default_factory=dict)


def _delete(session: Any, thread_ids: list[str], plans: dict[str, Plan], backup_ids: dict[str, str],
            unversioned: set[str]) -> _Deleted:
    """One statement: every checkpoint of ``thread_ids`` not kept, its writes rows, the blobs no kept checkpoint
    names; the chain starts' parent links cleared. With ``backup_ids`` (``{thread_id: backup id}``) the deleted rows
    move into the backup tables and the rest of each thread is copied beside them, as it was. The same statement
    reads, on the snapshot before its changes, the kept rows' digest and which of the ``unversioned`` channels
    (replayed channels some chain start has no version of) the writes rows it deletes hold, by namespace, so the
    proof makes no pass of its own over the deleted rows.
    """
    d = session.dialect
    writes = d.writes_table
    write_cols = tuple(c.strip() for c in session.dialect.write_columns.split(","))
    kept = sorted((t, *k) for t in thread_ids for k in plans[t].kept)
    starts = sorted((t, *k) for t in thread_ids for k in plans[t].chain_starts)
    sql = [
        "WITH k AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]) AS k(thread_id, checkpoint_ns, "
        "checkpoint_id)), ",
        f"h AS ({kept_digest_sql(writes, f'SELECT {_KEY} FROM k')}), ",
        f"d AS (DELETE FROM checkpoints WHERE thread_id = ANY(?) AND ({_KEY}) NOT IN (SELECT {_KEY} FROM k) "
        f"RETURNING {', '.join(_CHECKPOINT_COLS) if backup_ids else _KEY}, {d.checkpoint_bytes(None)} AS bytes), ",
        f"w AS (DELETE FROM {writes} x USING d WHERE x.thread_id = ANY(?) AND x.thread_id = d.thread_id "
        "AND x.checkpoint_ns = d.checkpoint_ns AND x.checkpoint_id = d.checkpoint_id RETURNING "
        f"{', '.join('x.' + c for c in write_cols) if backup_ids else 'x.thread_id, x.checkpoint_ns, x.channel'}, "
        f"{d.write_bytes('x')} AS bytes), ",
        # the blobs the kept checkpoints name; every other blob of the batch goes (garbage_blobs' rule)
        "n AS (SELECT c.thread_id, c.checkpoint_ns, v.key AS channel, v.value AS version FROM checkpoints c "
        "JOIN k USING (thread_id, checkpoint_ns, checkpoint_id) CROSS JOIN LATERAL "
        "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v WHERE v.value IS NOT NULL), ",
        f"b AS (DELETE FROM checkpoint_blobs x WHERE thread_id = ANY(?) AND ({_BLOB_KEY}) NOT IN (SELECT * FROM n) "
        f"RETURNING {', '.join('x.' + c for c in _BLOB_COLS) if backup_ids else 'x.thread_id'}, "
        f"{d.blob_bytes('x')} AS bytes), ",
        f"p AS (UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE ({_KEY}) IN "
        "(SELECT * FROM unnest(?::text[], ?::text[], ?::text[])) RETURNING thread_id)",
    ]
    params: list[Any] = [*key_columns(kept), thread_ids, thread_ids, thread_ids, *key_columns(starts)]
    parts = ["SELECT 'd' AS what, thread_id, NULL::text AS ns, NULL::text AS channel, COUNT(*) AS n, "
             "SUM(bytes)::bigint AS bytes FROM d GROUP BY thread_id",
             "SELECT 'w', thread_id, NULL, NULL, COUNT(*), SUM(bytes) FROM w GROUP BY thread_id",
             "SELECT 'b', thread_id, NULL, NULL, COUNT(*), SUM(bytes) FROM b GROUP BY thread_id",
             "SELECT 'p', thread_id, NULL, NULL, COUNT(*), NULL FROM p GROUP BY thread_id",
             "SELECT DISTINCT 'r', thread_id, checkpoint_ns, channel, NULL::bigint, NULL::bigint FROM w "
             "WHERE channel = ANY(?)",
             "SELECT 'h', thread_id, NULL, digest, NULL, NULL FROM h"]
    tail: list[Any] = [sorted(unversioned)]
    if backup_ids:
        sql.append(", m AS (SELECT * FROM unnest(?::text[], ?::text[]) AS m(thread_id, backup_id))")
        params += [list(backup_ids), list(backup_ids.values()), thread_ids, thread_ids]
        sql.append(_move("bc", "dfa_backup_checkpoints", "checkpoints", _CHECKPOINT_COLS, "d",
                         "JOIN k USING (thread_id, checkpoint_ns, checkpoint_id)"))
        sql.append(_move("bw", "dfa_backup_writes", writes, write_cols, "w",
                         "WHERE x.thread_id = ANY(?) AND NOT EXISTS (SELECT 1 FROM d WHERE d.thread_id = x.thread_id "
                         "AND d.checkpoint_ns = x.checkpoint_ns AND d.checkpoint_id = x.checkpoint_id)"))
        sql.append(_move("bb", "dfa_backup_blobs", "checkpoint_blobs", _BLOB_COLS, "b",
                         f"WHERE x.thread_id = ANY(?) AND ({_BLOB_KEY}) IN (SELECT * FROM n)"))
        parts += [f"SELECT '{c}', m.thread_id, NULL, NULL, COUNT(*), NULL FROM {c} JOIN m USING (backup_id) "
                  "GROUP BY m.thread_id" for c in ("bc", "bw", "bb")]
    done = _Deleted()
    for r in session.query("".join(sql) + " " + " UNION ALL ".join(parts), params + tail):
        what, t = r["what"], r["thread_id"]
        if what == "r":
            done.written.setdefault((t, r["ns"]), set()).add(r["channel"])
        elif what == "h":
            done.digest[t] = str(r["channel"])
        else:
            done.counts[(what, t)] = int(r["n"])
            if what in ("d", "w", "b"):
                done.deleted_bytes[t] = done.deleted_bytes.get(t, 0) + int(r["bytes"] or 0)
    return done


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
