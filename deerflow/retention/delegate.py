"""Keep-last-1 without backup through LangGraph's own ``PostgresSaver.prune(..., strategy="keep_latest")``.

LangGraph's ``prune`` (langgraph-checkpoint-postgres 3.2 and later; absent
before) keeps each namespace's latest checkpoint with its pending writes and
the blobs it references, and deletes a subgraph call's namespace with the
root checkpoint it started from. That is :func:`~deerflow.retention.plan.plan_keep_last`
with ``n=1`` exactly when, per thread:

* the thread has no delta evidence (LangGraph refuses delta threads);
* every checkpoint is format v4 or later (LangGraph keeps an older head's
  parent for its pending sends; our plan does not);
* the plan keeps only the heads (no other leaf protected for its pending
  writes) and deletes something;
* every parent link names an older checkpoint of its namespace.

Those threads are pruned by one call of LangGraph's ``prune`` inside our own
transaction (a ``REPEATABLE READ`` one: LangGraph's per-thread transactions
become savepoints of it, on its snapshot), after our per-thread locks; then
verified before commit: exactly the planned checkpoints remain, the kept
checkpoints' stored bytes (rows, the blobs they name, their writes rows) are
unchanged, and no writes row of a deleted checkpoint and no garbage blob is
left. A failed check, a refusal or a concurrent change rolls the whole batch
back and the caller prunes those threads one by one on our own path.
"""

from __future__ import annotations

from typing import Any

from deerflow.errors import StorageError
from deerflow.retention.plan import Node, Plan, plan_keep_last
from deerflow.retention.report import PruneReport
from deerflow.retention.setbased import (
    garbage_blobs,
    has_delta_evidence,
    read_bytes_digests,
    read_nodes_many,
    writes_owners_many,
)

__all__ = ["keep_latest_with_langgraph", "saver_prunes"]

_Key = tuple[str, str]


def keep_latest_with_langgraph(shared: Any, thread_ids: list[str], *, note: str = "") -> dict[str, PruneReport]:
    """Prune the threads LangGraph's ``keep_latest`` prunes as planned; ``{thread_id: report}`` of those.

    Args:
        shared: a :class:`deerflow.retention.batch.SharedConnection`.
        thread_ids: the threads asked for (the others are left to the caller).
        note: unused (no backup is taken); accepted for the caller's uniform call.

    Returns:
        Reports (``pruned``) of the threads pruned and committed here; ``{}`` when the saver has no
        ``prune``, no thread qualifies, or the batch was rolled back.
    """
    if not thread_ids or not saver_prunes(_saver_type()):
        return {}
    try:
        with shared.session(write=True, repeatable_read=True) as session:
            return _prune(session, sorted(thread_ids))
    except (StorageError, NotImplementedError, _Rollback):
        return {}
    except Exception as exc:  # a psycopg error raised inside LangGraph's prune (e.g. a serialization failure)
        if type(exc).__module__.startswith("psycopg"):
            return {}
        raise


class _Rollback(Exception):
    """The batch's verification failed: roll back, prune the threads on our own path."""


def saver_prunes(saver_type: type) -> bool:
    """Whether ``saver_type`` implements LangGraph's ``prune`` itself (langgraph-checkpoint-postgres 3.2 and
    later). ``BaseCheckpointSaver`` declares one that raises ``NotImplementedError``, so an older saver still
    has the attribute: the capability is a method of the saver's own, not the base class's."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    own = getattr(saver_type, "prune", None)
    return own is not None and own is not BaseCheckpointSaver.prune


def _saver_type() -> Any:
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver


def _prune(session: Any, thread_ids: list[str]) -> dict[str, PruneReport]:
    for t in thread_ids:
        session.lock_thread(t)
    owners = writes_owners_many(session, thread_ids)
    nodes = read_nodes_many(session, thread_ids, owners)
    old = {r["thread_id"] for r in session.query(
        "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id = ANY(?) "
        "AND COALESCE(checkpoint ->> 'v', '0')::int < 4", [thread_ids])}
    plans = {t: plan for t in thread_ids if t not in old and (plan := _plan(nodes[t])) is not None}
    if not plans:
        return {}
    chosen = sorted(plans)
    before_bytes = _stored_bytes(session, chosen)
    blob_keys = _blob_keys(session, chosen)
    garbage = {t: garbage_blobs(nodes[t] or [], plans[t], blob_keys[t]) for t in chosen}
    kept_digest = read_bytes_digests(session, {t: (nodes[t] or [], plans[t].kept) for t in chosen})
    session.saver.prune(chosen, strategy="keep_latest")
    _verify(session, chosen, nodes, plans, garbage, kept_digest)
    after_bytes = _stored_bytes(session, chosen)
    reports = {}
    for t in chosen:
        report = PruneReport(thread_id=t, rule="keep_last", attempts=1, status="pruned",
                             bytes_before=before_bytes[t], bytes_after=after_bytes[t])
        report.describe(plans[t], [])
        reports[t] = report
    session.commit()
    return reports


def _plan(nodes: list[Node] | None) -> Plan | None:
    """The keep-last-1 plan when LangGraph's ``keep_latest`` does exactly it, else ``None``."""
    if not nodes or has_delta_evidence(nodes):
        return None
    plan = plan_keep_last(nodes, 1)
    heads = {(ns, cid) for (ns, cid), reason in plan.protected.items() if reason == "head"}
    if not plan.deleted or plan.kept != heads:
        return None
    return plan


def _stored_bytes(session: Any, thread_ids: list[str]) -> dict[str, int]:
    d = session.dialect
    out = dict.fromkeys(thread_ids, 0)
    for r in session.query(
            f"SELECT thread_id, SUM({d.checkpoint_bytes(None)}) AS b FROM checkpoints WHERE thread_id = ANY(?) "
            f"GROUP BY thread_id UNION ALL SELECT thread_id, SUM({d.write_bytes(None)}) FROM {d.writes_table} "
            f"WHERE thread_id = ANY(?) GROUP BY thread_id UNION ALL SELECT thread_id, SUM({d.blob_bytes()}) "
            "FROM checkpoint_blobs WHERE thread_id = ANY(?) GROUP BY thread_id",
            [thread_ids, thread_ids, thread_ids]):
        out[r["thread_id"]] += int(r["b"] or 0)
    return out


def _blob_keys(session: Any, thread_ids: list[str]) -> dict[str, set[tuple[str, str, str]]]:
    out: dict[str, set[tuple[str, str, str]]] = {t: set() for t in thread_ids}
    for r in session.query("SELECT thread_id, checkpoint_ns, channel, version FROM checkpoint_blobs "
                           "WHERE thread_id = ANY(?)", [thread_ids]):
        out[r["thread_id"]].add((r["checkpoint_ns"], r["channel"], r["version"]))
    return out


def _verify(session: Any, thread_ids: list[str], nodes: dict[str, Any], plans: dict[str, Plan],
            garbage: dict[str, set[tuple[str, str, str]]], kept_digest: dict[str, str]) -> None:
    left: dict[str, set[_Key]] = {t: set() for t in thread_ids}
    for r in session.query("SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
                           "WHERE thread_id = ANY(?)", [thread_ids]):
        left[r["thread_id"]].add((r["checkpoint_ns"], r["checkpoint_id"]))
    owners = writes_owners_many(session, thread_ids)
    blobs = _blob_keys(session, thread_ids)
    after = read_bytes_digests(session, {t: (nodes[t] or [], plans[t].kept) for t in thread_ids})
    for t in thread_ids:
        if left[t] != plans[t].kept or owners[t] & plans[t].deleted or blobs[t] & garbage[t] \
                or after[t] != kept_digest[t]:
            raise _Rollback(t)
