"""One thread's prune on the set-based path (:mod:`deerflow.retention.setbased`), verified before commit.

The steps are the general path's (:mod:`deerflow.retention.prune`) without
the walk of every checkpoint:

1. the watermark and the plan from the rows' columns; the chain starts read
   through the saver (none may need a rebase);
2. the kept checkpoints (and a head the rule deletes) read through
   LangGraph's reader;
3. the deletes (moving the rows into the backup when asked), one statement
   per table;
4. verification: every kept checkpoint reads as before through LangGraph's
   reader and through our one-pass walk (of the kept checkpoints: all that is
   left), no writes row of a deleted checkpoint and no garbage blob remains,
   each namespace head is the planned one and reads as the old head did, the
   watermark holds; then commit.

:func:`prune_set_based` answers ``False`` (having written nothing) when the
thread is not for this path, and raises :class:`GeneralPathNeeded` when our
walk and LangGraph's reader disagree about a kept checkpoint (a shape whose
reading only the general path's rules settle); the caller rolls back and
takes the general path.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert.digest import channels_sha256, messages_sha256
from deerflow.convert.encoding import MessageDigester
from deerflow.convert.report import ThreadReport
from deerflow.convert.walk import Walk
from deerflow.errors import DeerFlowError
from deerflow.retention.plan import Plan, plan_keep_last, plan_safe_only
from deerflow.retention.proof import chain_starts_on_own_rows
from deerflow.retention.reading import langgraph_reader, read_through_langgraph
from deerflow.retention.rebase import RebasePlan, rebase
from deerflow.retention.report import PruneReport, RetentionAbort
from deerflow.retention.setbased import (
    ThreadFacts,
    backup_tables_committed,
    delete_planned,
    garbage_blobs,
    langgraph_reads_delta,
    read_bytes_digest,
    seeds,
    stored_messages,
    stores_none,
    thread_facts,
)
from deerflow.storage.addressing import config_for

__all__ = ["GeneralPathNeeded", "prune_set_based"]

_Key = tuple[str, str]
_EMPTY_DIGEST = messages_sha256([])


class GeneralPathNeeded(DeerFlowError):
    """Our walk and LangGraph's reader read a kept checkpoint differently: prune it on the general path.

    Raised inside the set-based prune's transaction (so it rolls back) and caught by
    :func:`deerflow.retention.prune.prune_thread`, which prunes the thread again on the general path; it never
    reaches a caller of the package.
    """


def prune_set_based(store: Any, thread_id: str, report: PruneReport, rule: str, *, n: int | None,
                    protect: set[str], dry_run: bool, backup: bool, note: str,
                    before_commit: Callable[[Any], None] | None) -> bool:
    """Prune (or preview) one thread of a Postgres :class:`~deerflow.retention.store.SqlStore`.

    Returns:
        ``True`` when done (``report`` filled, committed unless a dry run or nothing to prune);
        ``False`` when the thread needs the general path (nothing was written).

    Raises:
        RetentionAbort: as the general path (``not_found``, ``changed_during_prune``, ``verification_failed``).
        GeneralPathNeeded: the two readers disagree about a kept checkpoint (roll back, take the general path).
    """
    facts = thread_facts(store.session, thread_id, with_nodes=True)
    mark = (facts.count, facts.newest)
    if mark[0] == 0:
        raise RetentionAbort("not_found", f"Thread {thread_id!r} has no checkpoints.", "Check the thread id.")
    nodes = facts.nodes
    if nodes is None:
        return False
    plan = plan_keep_last(nodes, n or 1, protect) if rule == "keep_last" else plan_safe_only(nodes, protect)
    to_rebase = sorted(plan.chain_starts - seeds(store.session, thread_id, plan.chain_starts))
    if to_rebase and (_inputs_after_pending_writes(nodes) or stores_none(store.session, thread_id)):
        # the replay rule and LangGraph's readers may differ there: the general path keeps the chain that
        # LangGraph's reading goes through (reader_disagreement) or rebases with that reading
        return False
    tuples = {k: store.saver.get_tuple(config_for(thread_id, *k)) for k in to_rebase}
    report.bytes_before = facts.stored_bytes
    report.describe(plan, to_rebase)
    if not plan.deleted:
        report.status, report.bytes_after = "nothing_to_prune", report.bytes_before
        return True
    old_heads = _heads(node.key for node in nodes)
    new_heads = _heads(plan.kept)
    digest = MessageDigester()
    # With the heads kept, a kept checkpoint reads its own rows, the writes of its kept ancestors and its chain
    # start's value: so the kept rows' bytes, unchanged, and the chain starts, read the same through LangGraph's
    # reader, prove every kept checkpoint reads as before. Full-mode chain starts store their value in their
    # rows, and so do delta chain starts that read only their own rows (:func:`chain_starts_on_own_rows`); the
    # other delta ones are read (all channels) before, with the kept checkpoints that share a rebased one's
    # ``messages`` version (the split-version rule needs their readings), and again after the deletes unless
    # their stored ``messages`` blob is their reading's own encoding (:func:`_stored_as_read`).
    by_bytes = old_heads == new_heads
    if by_bytes:
        starts = plan.chain_starts - set(to_rebase) if langgraph_reads_delta(nodes) else set()
        if starts:
            starts -= {(ns, cid) for _t, ns, cid in chain_starts_on_own_rows(store.session, {thread_id: plan})}
        read_keys = sorted(starts | set(to_rebase) | _sharing_version(nodes, plan, to_rebase))
        rows_keys = plan.kept - set(to_rebase)
    else:
        read_keys, rows_keys = sorted(plan.kept | set(old_heads.items())), set()
    values, messages = _read(store, thread_id, read_keys)
    if any(tuples[k] is None or k not in messages for k in to_rebase):
        return False  # LangGraph's reader cannot read a chain start: the walk's findings say why
    # the readings' digests where a rebase or the walk's comparison needs them now; the others only if read again
    before = _readings(values, messages, read_keys if to_rebase or not by_bytes else [], digest)
    targets = _versions(store, facts, nodes, before, to_rebase) if to_rebase else {}
    garbage = garbage_blobs(nodes, plan, facts.blob_keys, {k: {"messages": v} for k, v in targets.items()})
    if dry_run:
        rows, writes, blobs = store.sizes(thread_id)
        freed = sum(rows.get(k, 0) + writes.get(k, 0) for k in plan.deleted) + sum(blobs.get(g, 0) for g in garbage)
        added = sum(len(store.saver.serde.dumps_typed(_DeltaSnapshot(messages[k]))[1]) for k in to_rebase)
        report.bytes_after, report.status = report.bytes_before - freed + added, "would_prune"
        return True
    written = {(k[0], "messages", str(v)) for k, v in targets.items()}  # the rebases' snapshots (read below)
    rows_digest = read_bytes_digest(store.session, thread_id, nodes, rows_keys, written) if by_bytes else ""
    proven = _stored_as_read(store, thread_id, read_keys, messages, to_rebase) if by_bytes else set()
    reread = [k for k in read_keys if k not in proven] if by_bytes else []
    before.update(_readings(values, messages, [k for k in reread if k not in before], digest))
    if backup and store.persistent:
        report.backup_id = f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    delete_planned(store.session, thread_id, plan, garbage, backup_id=report.backup_id,
                   note=note or f"prune:{rule}", size=report.bytes_before)
    for k in to_rebase:  # after the backup copied the kept rows as they were
        rebase(store, thread_id, k, tuples[k], messages[k], targets[k])
    after = thread_facts(store.session, thread_id, with_nodes=False)
    _check_watermark((after.count, after.newest), mark, plan)
    if by_bytes:
        if read_bytes_digest(store.session, thread_id, nodes, rows_keys, written) != rows_digest:
            raise _fail("a kept checkpoint's stored rows changed during the prune", {})
        if reread and read_through_langgraph(store.saver, thread_id, reread, digest) != {k: before[k] for k in reread}:
            raise GeneralPathNeeded(reread)  # a chain start reads differently: the general path's rules decide
    else:
        _verify_readings(store, thread_id, plan, before, digest, old_heads)
    _verify_rows(after, plan, garbage, new_heads)
    if before_commit is not None:
        before_commit(store)
    _check_watermark(store.watermark(thread_id), mark, plan)
    report.bytes_after = after.stored_bytes
    report.status = "pruned"
    store.session.commit()
    if report.backup_id:
        backup_tables_committed(store.session)
    return True


def _read(store: Any, thread_id: str, keys: list[_Key]) -> tuple[dict[_Key, Any], dict[_Key, list[Any]]]:
    """``({key: values read, or the failed reading}, {key: messages read})`` through LangGraph's reader, each
    key read once (a failed reading is :func:`read_through_langgraph`'s; no ``messages`` for it)."""
    reader = langgraph_reader(store.saver)
    values: dict[_Key, Any] = {}
    messages: dict[_Key, list[Any]] = {}
    for ns, cid in keys:
        try:
            values[(ns, cid)] = reader.get(config_for(thread_id, ns, cid)).values
        except Exception as exc:  # noqa: BLE001 - a reader failure is a difference (and no rebase)
            values[(ns, cid)] = (f"error: {type(exc).__name__}: {exc}", "")
            continue
        messages[(ns, cid)] = list(values[(ns, cid)].get("messages") or [])
    return values, messages


def _readings(values: dict[_Key, Any], messages: dict[_Key, list[Any]], keys: list[_Key],
              digest: Any) -> dict[_Key, Any]:
    """``{key: (messages_sha256, channels_sha256)}`` of :func:`_read`'s values, as :func:`read_through_langgraph`
    gives them (a failed reading as it was)."""
    return {k: (digest(messages[k]), channels_sha256(values[k])) if k in messages else values[k] for k in keys}


def _stored_as_read(store: Any, thread_id: str, keys: list[_Key], messages: dict[_Key, list[Any]],
                    rebased: list[_Key]) -> set[_Key]:
    """The ``keys`` (none rebased) whose stored ``messages`` value, the blob of their own version, is byte for
    byte LangGraph's reading of them encoded as a ``_DeltaSnapshot`` by the saver's serializer. Such a
    checkpoint reads that blob and its other channels from its own rows: with those bytes unchanged it reads
    as before whatever became of its ancestors, so it needs no second reading."""
    stored = stored_messages(store.session, thread_id, [k for k in keys if k in messages and k not in rebased])
    return {k for k, value in stored.items()
            if value == store.saver.serde.dumps_typed(_DeltaSnapshot(messages[k]))}


def _inputs_after_pending_writes(nodes: list[Any]) -> bool:
    """True when an ``input`` checkpoint's parent stores writes rows (a turn started over pending tasks, e.g. a
    fork from an interrupted step): there the one-pass replay rule reads without those writes, LangGraph's
    reader with them, and only the general path's walk knows the value a rebase must store."""
    owners = {node.key for node in nodes if node.owns_writes}
    return any(node.metadata.get("source") == "input" and node.parent_id is not None
               and (node.ns, node.parent_id) in owners for node in nodes)


def _sharing_version(nodes: list[Any], plan: Plan, to_rebase: list[_Key]) -> set[_Key]:
    """Kept checkpoints with the ``messages`` version of a chain start to rebase (same namespace)."""
    wanted = {(node.ns, str(node.versions.get("messages"))) for node in nodes
              if node.key in to_rebase and node.versions.get("messages") is not None}
    return {node.key for node in nodes if node.key in plan.kept
            and (node.ns, str(node.versions.get("messages"))) in wanted}


def _versions(store: Any, facts: ThreadFacts, nodes: list[Any], before: dict[_Key, Any],
              to_rebase: list[_Key]) -> dict[_Key, Any]:
    """The ``messages`` version each rebased chain start stores its snapshot under (:class:`RebasePlan`); the
    kept checkpoints read (``before``) include every one sharing such a version."""
    versions = {node.key: node.versions.get("messages") for node in nodes if node.key in before}
    vplan = RebasePlan(store.shared_versions, {k: (versions[k], before[k][0]) for k in before}, facts.blob_keys)
    return {k: vplan.version_for(k[0], versions[k], before[k][0]) for k in to_rebase}


def _heads(keys: Any) -> dict[str, str]:
    heads: dict[str, str] = {}
    for ns, cid in keys:
        heads[ns] = max(heads.get(ns, cid), cid)
    return heads


def _check_watermark(now: tuple[int, str | None], mark: tuple[int, str | None], plan: Plan) -> None:
    count, newest = now
    if count != len(plan.kept) or (newest is not None and mark[1] is not None and newest > mark[1]):
        raise RetentionAbort("changed_during_prune", "new checkpoints were written while pruning",
                             "Retried automatically; if it keeps happening, prune when the thread is idle.")


def _fail(error: str, difference: dict[str, Any]) -> RetentionAbort:
    return RetentionAbort("verification_failed", error, "Nothing was changed (rolled back). Report the thread shape.",
                          difference)


def _verify_readings(store: Any, thread_id: str, plan: Plan, before: dict[_Key, Any], digest: Any,
                     old_heads: dict[str, str]) -> None:
    """Every kept checkpoint reads as before through LangGraph's reader and our walk; new heads as old ones."""
    kept = sorted(plan.kept)
    after = read_through_langgraph(store.saver, thread_id, kept, digest)
    for k in kept:
        if after[k] != before[k]:
            raise _fail(f"checkpoint {k[1]} reads differently after the prune (LangGraph's reader)",
                        {"checkpoint_ns": k[0], "checkpoint_id": k[1], "before": list(before[k]),
                         "after": list(after[k])})
    walked = {(e.ns, e.checkpoint_id): e for e in Walk(store.session, thread_id, ThreadReport(thread_id=thread_id),
                                                       lambda _tup, _value: False)}
    for k in kept:
        got = walked[k].digest if k in walked else _EMPTY_DIGEST
        if got != before[k][0]:
            raise GeneralPathNeeded(k)
    for (ns, cid), reason in plan.protected.items():
        if reason == "head" and before[(ns, cid)][0] != before[(ns, old_heads[ns])][0]:
            raise _fail(f"the new head {cid} reads differently from the deleted head {old_heads[ns]}",
                        {"checkpoint_ns": ns, "checkpoint_id": cid})


def _verify_rows(after: ThreadFacts, plan: Plan, garbage: set[tuple[str, str, str]],
                 new_heads: dict[str, str]) -> None:
    """No writes row of a deleted checkpoint, no garbage blob left; each namespace head the planned one."""
    orphans = after.owners & plan.deleted
    if orphans:
        k = min(orphans)
        raise _fail(f"writes rows of deleted checkpoint {k[1]} remain", {"checkpoint_ns": k[0], "checkpoint_id": k[1]})
    left = after.blob_keys & garbage
    if left:
        ns, channel, version = min(left)
        raise _fail(f"blob {channel}@{version} only deleted checkpoints used remains",
                    {"checkpoint_ns": ns, "channel": channel, "version": version})
    for (ns, cid), reason in plan.protected.items():
        if reason == "head" and new_heads.get(ns) != cid:
            raise _fail(f"namespace head {cid} is no longer the head", {"checkpoint_ns": ns, "checkpoint_id": cid})
