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

What is read costs what LangGraph's ``prune`` reads, or less: the plan comes
from one statement over the batch's ``checkpoints`` rows (ids, parent links,
whether writes rows are stored under each; no value decoded), and the checks
after the ``prune`` read only what is left (the kept checkpoints, the writes
rows under no checkpoint, the blobs no kept checkpoint references).
"""

from __future__ import annotations

from typing import Any

from deerflow.errors import StorageError
from deerflow.retention.batchcheck import BatchRollback, read_after, verify_batch
from deerflow.retention.batchfacts import read_batch_facts
from deerflow.retention.plan import Node, Plan, plan_keep_last
from deerflow.retention.proof import kept_bytes_digests
from deerflow.retention.report import PruneReport

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
    except (StorageError, NotImplementedError, BatchRollback):
        return {}
    except Exception as exc:  # a psycopg error raised inside LangGraph's prune (e.g. a serialization failure)
        if type(exc).__module__.startswith("psycopg"):
            return {}
        raise


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
    before = read_batch_facts(session, thread_ids)
    plans = {t: plan for t, facts in before.items() if not facts.refused and (plan := _plan(facts.nodes)) is not None}
    if not plans:
        return {}
    chosen = sorted(plans)
    kept = {t: plans[t].kept for t in chosen}
    kept_digest = kept_bytes_digests(session, kept)
    session.saver.prune(chosen, strategy="keep_latest")
    after = read_after(session, kept)
    verify_batch(kept, before, after, kept_digest)
    reports = {}
    for t in chosen:
        report = PruneReport(thread_id=t, rule="keep_last", attempts=1, status="pruned",
                             bytes_before=before[t].stored_bytes, bytes_after=after[t].stored_bytes)
        report.describe(plans[t], [])
        reports[t] = report
    session.commit()
    return reports


def _plan(nodes: list[Node] | None) -> Plan | None:
    """The keep-last-1 plan when LangGraph's ``keep_latest`` does exactly it, else ``None``."""
    if not nodes:
        return None
    plan = plan_keep_last(nodes, 1)
    heads = {(ns, cid) for (ns, cid), reason in plan.protected.items() if reason == "head"}
    if not plan.deleted or plan.kept != heads:
        return None
    return plan
