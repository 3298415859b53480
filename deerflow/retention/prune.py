"""Prune one thread: plan, back up, rebase, delete, verify, commit -- in one transaction.

Per thread (:func:`prune_thread`; a Celery task calls it with one thread id):

1. open a write session and take the same per-thread lock as conversion;
   record the watermark (checkpoint count, newest id);
2. walk the thread once (:class:`deerflow.convert.walk.Walk`: read
   through the saver, one-pass materialization) -- every checkpoint's value
   and digest;
3. plan (:mod:`deerflow.retention.plan`): kept, deleted, protected (with the
   reason), chain starts; read every kept checkpoint through LangGraph's
   reader (messages and channel digests);
4. back up the whole thread (checkpoints, blobs, writes rows) unless told not to;
5. rebase each chain start whose value lives upstream with LangGraph's
   reading of it (:mod:`deerflow.retention.rebase`), then delete the rest with their writes
   rows and the blobs no kept checkpoint references, and clear the parent
   link of every chain start;
6. verify: every kept checkpoint reads as before through our walk and
   through LangGraph's reader, no writes row of a deleted checkpoint and no
   blob only deleted ones used remains, each namespace head is the planned
   one and reads the same -- no departure accepted: a rebase stores
   LangGraph's reading, and where the replay rule and LangGraph's reader
   disagree the plan keeps the chain that reading goes through); otherwise
   roll back;
7. compare the watermark (a thread that got a new checkpoint meanwhile is
   rolled back and retried) and commit.

A dry run does steps 1-3 on a read-only snapshot and estimates the bytes.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.config.database_config import DatabaseConfig
from deerflow.convert import backups
from deerflow.convert.digest import messages_sha256
from deerflow.convert.encoding import MessageDigester
from deerflow.convert.onepass import stored_seed
from deerflow.convert.report import ThreadReport
from deerflow.convert.walk import Walk
from deerflow.retention.plan import Node, Plan, plan_keep_last, plan_safe_only
from deerflow.retention.reading import langgraph_values, read_through_langgraph
from deerflow.retention.rebase import RebasePlan, needs_rebase, rebase
from deerflow.retention.report import PruneReport, RetentionAbort
from deerflow.retention.setprune import GeneralPathNeeded, prune_set_based
from deerflow.retention.store import MemoryStore, SqlStore
from deerflow.storage.savers import sqlite_checkpoint_path
from deerflow.storage.sessions import open_session


def _no_rewrite(_tup: Any, _value: Any) -> bool:
    """The walk's ``needs_rewrite``: retention rewrites no checkpoint the walk hands on (it only reads values)."""
    return False

__all__ = ["RULES", "check_rule", "keep_last", "prune_thread", "safe_only"]

_Key = tuple[str, str]
RULES = ("keep_last", "safe_only")
_EMPTY_DIGEST = messages_sha256([])


def keep_last(target: Any, thread_id: str, n: int, **options: Any) -> PruneReport:
    """Keep each namespace's head and its ``n - 1`` nearest ancestors (plus the protected set); see
    :func:`prune_thread`."""
    return prune_thread(target, thread_id, "keep_last", n=n, **options)


def safe_only(target: Any, thread_id: str, **options: Any) -> PruneReport:
    """Delete only trailing duration-only leaves and leaf sibling branches; see :func:`prune_thread`."""
    return prune_thread(target, thread_id, "safe_only", **options)


def check_rule(rule: str, n: int | None) -> None:
    """Raise ``ValueError`` for an unknown rule or, for ``keep_last``, an ``n`` that is not an integer >= 1."""
    if rule not in RULES:
        raise ValueError(f"unknown retention rule {rule!r}; use one of {', '.join(RULES)}")
    if rule == "keep_last" and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ValueError(f"keep_last needs n >= 1 (the head is always kept), got {n!r}")


def prune_thread(
    target: DatabaseConfig | Any,
    thread_id: str,
    rule: str,
    *,
    n: int | None = None,
    protect: Iterable[str] = (),
    dry_run: bool = False,
    backup: bool = True,
    max_attempts: int = 3,
    note: str = "",
    before_commit: Callable[[Any], None] | None = None,
    shared: Any = None,
) -> PruneReport:
    """Prune one thread by ``rule``, verified, in one transaction.

    Args:
        target: a :class:`DatabaseConfig` (sqlite or postgres) or an ``InMemorySaver``.
        thread_id: the thread.
        rule: ``"keep_last"`` (needs ``n``) or ``"safe_only"``.
        n: checkpoints kept on each head's chain (count, >= 1).
        protect: checkpoint ids to keep (explicit resume targets), each kept on its own and rebased.
        dry_run: plan and estimate only; nothing is written (read-only snapshot, no lock).
        backup: back up the whole thread first (revert with :func:`deerflow.retention.revert_prune`).
            Ignored for memory (nothing persists).
        max_attempts: transactions to try when new checkpoints arrive meanwhile (count).
        note: stored with the backup (e.g. the job id).
        before_commit: test hook called with the store just before commit.
        shared: a :class:`deerflow.retention.batch.SharedConnection` to run the transaction on (Postgres;
            :func:`deerflow.retention.batch.prune_threads` passes one), instead of a new connection.

    Returns:
        A :class:`PruneReport`: ``pruned``, ``would_prune`` (dry run), ``nothing_to_prune``, or a
        failure status (``not_found``, ``blocked``, ``verification_failed``, ``changed_during_prune``)
        with ``error`` and ``hint``; on failure nothing was written.

    Raises:
        ValueError: an unknown rule or a bad ``n`` (before anything is read).
    """
    check_rule(rule, n)
    started = time.monotonic()
    options: dict[str, Any] = {"n": n, "protect": set(protect), "dry_run": dry_run, "backup": backup, "note": note,
               "before_commit": before_commit}
    report = PruneReport(thread_id=thread_id, rule=rule)
    set_based, attempt = True, 1
    while True:
        report = PruneReport(thread_id=thread_id, rule=rule, attempts=attempt)
        try:
            with _store(target, thread_id, write=not dry_run, shared=shared) as store:
                if not (set_based and _has_set_based_path(store)
                        and prune_set_based(store, thread_id, report, rule, **options)):
                    _prune_once(store, thread_id, report, rule, **options)
        except GeneralPathNeeded:
            set_based = False  # rolled back; the general path's readings decide (not a new attempt)
            continue
        except RetentionAbort as exc:
            report.fail(exc)
        if report.status != "changed_during_prune" or attempt >= max_attempts:
            break
        attempt += 1
    report.duration_s = round(time.monotonic() - started, 3)
    return report


def _has_set_based_path(store: Any) -> bool:
    """Postgres (jsonb columns, one blob row per version): the plan can be read from the rows' columns."""
    return isinstance(store, SqlStore) and store.dialect.has_blob_table


class _store:  # noqa: N801 - a context manager used like a function
    """A :class:`SqlStore` on a new session, or a :class:`MemoryStore` on an ``InMemorySaver``."""

    def __init__(self, target: Any, thread_id: str, *, write: bool, shared: Any = None):
        self.target, self.thread_id, self.write, self.shared = target, thread_id, write, shared
        self._cm: Any = None

    def __enter__(self) -> Any:
        if isinstance(self.target, DatabaseConfig):
            if self.target.backend == "sqlite" and not sqlite_checkpoint_path(self.target).exists():
                raise RetentionAbort("not_found", f"SQLite checkpoint file {sqlite_checkpoint_path(self.target)} "
                                     "does not exist.", "Point database.sqlite_dir at DeerFlow's deerflow.db.")
            self._cm = (self.shared.session(write=self.write) if self.shared is not None
                        else open_session(self.target, write=self.write))
            store = SqlStore(self._cm.__enter__())
            if self.write:
                store.session.lock_thread(self.thread_id)
            return store
        if not hasattr(self.target, "storage") or not hasattr(self.target, "blobs"):
            raise ValueError(f"retention needs a DatabaseConfig or an InMemorySaver, not {type(self.target).__name__}")
        self._cm = MemoryStore(self.target, self.thread_id)
        return self._cm.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)


def _walk(store: Any, thread_id: str) -> tuple[dict[_Key, Any], list[dict[str, Any]]]:
    """``({key: _Entry}, findings)`` for every checkpoint the walk reaches."""
    walk_report = ThreadReport(thread_id=thread_id)
    entries = {(e.ns, e.checkpoint_id): e for e in Walk(store.session, thread_id, walk_report, _no_rewrite)}
    return entries, walk_report.findings


def _nodes(entries: dict[_Key, Any], owners: set[_Key]) -> list[Node]:
    out = []
    for (ns, cid), e in entries.items():
        parent = e.tup.parent_config["configurable"]["checkpoint_id"] if e.tup.parent_config else None
        seed = stored_seed(e.tup.checkpoint["channel_values"].get("messages"))[0]
        out.append(Node(ns, cid, parent, e.tup.metadata or {}, e.tup.checkpoint.get("channel_versions") or {},
                        (ns, cid) in owners, seed, e.differs))
    return out


def _prune_once(store: Any, thread_id: str, report: PruneReport, rule: str, *, n: int | None, protect: set[str],
                dry_run: bool, backup: bool, note: str, before_commit: Callable[[Any], None] | None) -> None:
    mark = store.watermark(thread_id)
    if mark[0] == 0:
        raise RetentionAbort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")
    report.bytes_before = store.stored_bytes(thread_id)
    entries, findings = _walk(store, thread_id)
    if len(entries) < mark[0]:
        blocking = [f for f in findings if f["blocking"]]
        raise RetentionAbort("blocked", f"{mark[0] - len(entries)} checkpoint(s) cannot be walked"
                             + (f"; first: {blocking[0]['detail']}" if blocking else ""),
                             "The thread's parent links are broken; inspect it before pruning.")
    nodes = _nodes(entries, store.writes_owners(thread_id))
    plan = plan_keep_last(nodes, n or 1, protect) if rule == "keep_last" else plan_safe_only(nodes, protect)
    rebased = sorted(k for k in plan.chain_starts if needs_rebase(entries[k].tup, entries[k].value))
    unknown = [k for k in rebased if entries[k].value is None]
    if unknown:
        raise RetentionAbort("blocked", f"the value of checkpoint {unknown[0][1]} is unknown (a blocking finding), "
                             "so it cannot be rebased", "Inspect the thread's findings; it was not pruned.")
    report.describe(plan, rebased)
    if not plan.deleted:
        report.status, report.bytes_after = "nothing_to_prune", report.bytes_before
        return
    versions = {k: (entries[k].tup.checkpoint.get("channel_versions") or {}).get("messages") for k in plan.kept}
    vplan = RebasePlan(store.shared_versions, {k: (versions[k], entries[k].digest) for k in plan.kept},
                       store.blob_keys(thread_id))
    targets = {k: vplan.version_for(k[0], versions[k], entries[k].digest) for k in rebased}
    for k, version in targets.items():
        versions[k] = version
    garbage = _garbage(entries, plan, versions, store.blob_keys(thread_id))
    if dry_run:
        report.bytes_after = _estimate(store, thread_id, plan, garbage, [entries[k].value for k in rebased])
        report.status = "would_prune"
        return
    digest = MessageDigester()
    before = read_through_langgraph(store.saver, thread_id, sorted(plan.kept), digest)
    values = _rebase_values(store, thread_id, rebased, before, digest)
    if backup and store.persistent:
        report.backup_id = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        backups.copy_to_backup(store.session, report.backup_id, thread_id, note=note or f"prune:{rule}",
                               whole_thread=True)
    for k in rebased:
        rebase(store, thread_id, k, entries[k].tup, values[k], targets[k])
    store.delete(thread_id, plan.deleted, garbage, sorted(plan.chain_starts))
    _check_watermark(store, thread_id, mark, plan)
    _verify(store, thread_id, plan, entries, before, garbage, digest)
    if before_commit is not None:
        before_commit(store)
    _check_watermark(store, thread_id, mark, plan)
    report.bytes_after = store.stored_bytes(thread_id)
    report.status = "pruned"
    store.session.commit() if store.persistent else store.commit()


def _rebase_values(store: Any, thread_id: str, rebased: list[_Key], before: dict[_Key, Any],
                   digest: Any) -> dict[_Key, list[Any]]:
    """``{key: messages}`` each rebased checkpoint stores: LangGraph's reading of it, read before any write.

    Raises:
        RetentionAbort: ``blocked`` when LangGraph's reader fails there (nothing it reads can be kept).
    """
    values = langgraph_values(store.saver, thread_id, rebased)
    for k in rebased:
        value = values[k]
        if not isinstance(value, list) or digest(value) != before[k][0]:
            raise RetentionAbort("blocked", f"LangGraph's reader cannot read checkpoint {k[1]} ({before[k][0]}), "
                                 "so it cannot be rebased", "Inspect the thread on its page; it was not pruned.")
    return values


def _garbage(entries: dict[_Key, Any], plan: Plan, versions: dict[_Key, Any],
             blob_keys: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """The thread's blobs no kept checkpoint names (:func:`deerflow.retention.setbased.garbage_blobs`' rule)."""
    kept = set()
    for k in plan.kept:
        for channel, version in (entries[k].tup.checkpoint.get("channel_versions") or {}).items():
            kept.add((k[0], channel, str(versions[k]) if channel == "messages" else str(version)))
    return blob_keys - kept


def _estimate(store: Any, thread_id: str, plan: Plan, garbage: set[tuple[str, str, str]],
              values: list[list[Any]]) -> int:
    rows, writes, blobs = store.sizes(thread_id)
    freed: int = sum(rows.get(k, 0) + writes.get(k, 0) for k in plan.deleted) + sum(blobs.get(g, 0) for g in garbage)
    added = sum(len(store.saver.serde.dumps_typed(_DeltaSnapshot(list(v)))[1]) for v in values)
    return int(store.stored_bytes(thread_id)) - freed + added


def _check_watermark(store: Any, thread_id: str, mark: tuple[int, str | None], plan: Plan) -> None:
    """After the deletes the thread must hold exactly the kept checkpoints; more means a live writer."""
    count, newest = store.watermark(thread_id)
    if count != len(plan.kept) or (newest is not None and mark[1] is not None and newest > mark[1]):
        raise RetentionAbort("changed_during_prune", "new checkpoints were written while pruning",
                             "Retried automatically; if it keeps happening, prune when the thread is idle.")


def _verify(store: Any, thread_id: str, plan: Plan, entries: dict[_Key, Any], before: dict[_Key, Any],
            garbage: set[tuple[str, str, str]], digest: Any) -> None:
    """Every kept checkpoint reads as before (ours and LangGraph's); no orphaned rows; heads as planned.

    No departure is accepted: a rebase stores LangGraph's reading, and where the readers disagree the plan
    keeps the chain the reading goes through (``reader_disagreement``), so both read exactly as before.
    """
    def fail(error: str, difference: dict[str, Any]) -> RetentionAbort:
        return RetentionAbort("verification_failed", error,
                              "Nothing was changed (rolled back). Report the thread shape.", difference)

    after_entries, _findings = _walk(store, thread_id)
    for k in sorted(plan.kept):
        want = entries[k].digest
        got = after_entries[k].digest if k in after_entries else None
        if (got is None and want == _EMPTY_DIGEST
                and "messages" not in (entries[k].tup.checkpoint.get("channel_versions") or {})):
            got = want  # a chain start that never had messages: our walk has no seed for it, LangGraph reads []
        if got != want:
            raise fail(f"checkpoint {k[1]} reads differently after the prune (one-pass walk)",
                       {"checkpoint_ns": k[0], "checkpoint_id": k[1], "before_sha256": want, "after_sha256": got})
    after = read_through_langgraph(store.saver, thread_id, sorted(plan.kept), digest)
    for k in sorted(plan.kept):
        if after[k] != before[k]:
            raise fail(f"checkpoint {k[1]} reads differently after the prune (LangGraph's reader)",
                       {"checkpoint_ns": k[0], "checkpoint_id": k[1], "before": list(before[k]),
                        "after": list(after[k])})
    orphans = store.writes_owners(thread_id) & plan.deleted
    if orphans:
        k = min(orphans)
        raise fail(f"writes rows of deleted checkpoint {k[1]} remain", {"checkpoint_ns": k[0], "checkpoint_id": k[1]})
    left = store.blob_keys(thread_id) & garbage
    if left:
        ns, channel, version = min(left)
        raise fail(f"blob {channel}@{version} only deleted checkpoints used remains",
                   {"checkpoint_ns": ns, "channel": channel, "version": version})
    heads: dict[str, str] = {}
    for ns, cid in plan.kept:
        heads[ns] = max(heads.get(ns, cid), cid)
    old_heads: dict[str, str] = {}
    for ns, cid in entries:
        old_heads[ns] = max(old_heads.get(ns, cid), cid)
    for (ns, cid), reason in plan.protected.items():
        if reason == "head" and heads.get(ns) != cid:
            raise fail(f"namespace head {cid} is no longer the head", {"checkpoint_ns": ns, "checkpoint_id": cid})
        if reason == "head" and entries[(ns, cid)].digest != entries[(ns, old_heads[ns])].digest:
            raise fail(f"the new head {cid} reads differently from the deleted head {old_heads[ns]}",
                       {"checkpoint_ns": ns, "checkpoint_id": cid})
