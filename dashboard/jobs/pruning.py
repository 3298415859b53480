"""Retention for the dashboard's jobs: the rule a prune job carries, running one of its rows, the tree's marks.

The ``prune_dry_run`` and ``prune`` kinds run on the conversion job machinery
(:mod:`dashboard.jobs.services`: claims, throttle, pause/cancel/retry, kill
safety, reverts from backup); these functions are what differs. Each row
calls :func:`deerflow.retention.prune_thread` or
:func:`deerflow.retention.delete_thread` (one verified transaction, the same
per-thread lock as conversion, rolled back and retried when a live writer
adds a checkpoint meanwhile) in a delta-mode worker, the only mode that
reads both modes' history.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from dashboard.errors.jobs import InvalidRetention
from dashboard.formatting import plural
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.runtime import DashboardRuntime, get_runtime
from deerflow import convert, inventory
from deerflow.convert import ThreadReport
from deerflow.inventory import deerflow_tables
from deerflow.retention import PruneReport, delete_thread, prune_thread, revert_prune
from deerflow.storage import reader_for

__all__ = ["CAP_CODE", "MARK_WORDS", "MAX_KEEP_LAST", "NOT_ORPHANED_CODE", "REASON_WORDS", "RULES", "cap_outcome",
           "cap_report", "checkpoint_marks", "is_prune_backup", "normalize_retention", "orphan_refusal", "revert_one",
           "run_one", "to_thread_report"]

#: The largest N of ``keep_last`` a job or policy takes (a thread with more checkpoints keeps them all anyway).
MAX_KEEP_LAST = 1_000_000

#: The rules a prune job may carry (the ``prune_threads`` command's ``--keep-last``, ``--safe-only``,
#: ``--delete-threads``).
RULES = ("keep_last", "safe_only", "delete_threads")
#: The error code of an orphan not deleted because it is no orphan any more (:func:`orphan_refusal`).
NOT_ORPHANED_CODE = "not_orphaned"
#: Most checkpoint ids one job may protect.
MAX_PROTECT = 1000
#: Why a checkpoint the rule would delete is kept, in words (``PruneReport.protected[*].reason``).
REASON_WORDS = {
    "head": "head: the latest resumable state of its namespace",
    "resume_target": "resume target: protected by the operator",
    "pending_writes": "pending writes: writes rows a resume would still apply",
    "chain_to_seed": "chain to the seed: a kept checkpoint reads its value through it",
    "reader_disagreement": ("reader disagreement: LangGraph's reader reads a kept checkpoint through it "
                            "differently from the replay rule, so it is kept rather than rebased"),
}
#: The tree's marks in words (the thread page's history viewed from a prune job).
MARK_WORDS = {"kept": "kept", "deleted": "deleted", "protected": "protected", "rebased": "kept, rebased"}
#: The statuses of a prune job's rows that wrote (their backups are what a revert restores).
WRITTEN = ("pruned", "deleted")


def normalize_retention(raw: dict[str, Any]) -> dict[str, Any]:
    """A validated copy of a prune job's rule.

    Args:
        raw: ``{"rule", "keep_last", "protect", "backup", "max_delete_per_run"}``; ``keep_last`` is needed
            (an int >= 1) for ``keep_last`` and refused for the other rules; ``protect`` is a list of checkpoint
            ids; ``backup`` defaults to true; ``max_delete_per_run`` (most threads the job prunes or deletes,
            a whole number >= 0) defaults to ``None``, no cap.

    Returns:
        ``{"rule", "keep_last", "protect", "backup"}`` (``protect`` de-duplicated, in the given order), plus
        ``"max_delete_per_run"`` when a cap is given.

    Raises:
        InvalidRetention: an unknown rule, a missing or bad ``keep_last``, bad ``protect`` entries,
            a ``backup`` that is not a boolean, or a negative or non-integer ``max_delete_per_run``
            (400, code ``invalid_retention``).
    """
    rule = raw.get("rule")
    if rule not in RULES:
        raise InvalidRetention(f"rule must be one of {', '.join(RULES)}; got {rule!r}.")
    n = raw.get("keep_last")
    if rule == "keep_last":
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_KEEP_LAST:
            raise InvalidRetention(f"keep_last must be a whole number from 1 (the head is always kept) to "
                                   f"{MAX_KEEP_LAST:,}; got {n!r}.")
    elif n is not None:
        raise InvalidRetention(f"keep_last is only for rule keep_last; rule {rule} keeps what it proves safe "
                               "or nothing.")
    protect = raw.get("protect") or []
    if not isinstance(protect, list) or not all(isinstance(p, str) and p and len(p) <= 200 for p in protect):
        raise InvalidRetention("protect must be a list of checkpoint ids (non-empty strings of at most 200 "
                               "characters).")
    if len(protect) > MAX_PROTECT:
        raise InvalidRetention(f"protect lists {len(protect):,} ids; at most {MAX_PROTECT:,}.")
    backup = raw.get("backup", True)
    if not isinstance(backup, bool):
        raise InvalidRetention(f"backup must be true or false; got {backup!r}.")
    out = {"rule": rule, "keep_last": n if rule == "keep_last" else None,
           "protect": list(dict.fromkeys(protect)), "backup": backup}
    cap = _delete_cap(raw.get("max_delete_per_run"))
    if cap is not None:
        out["max_delete_per_run"] = cap
    return out


def _delete_cap(cap: Any) -> int | None:
    if cap is None:
        return None
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
        raise InvalidRetention(f"max_delete_per_run must be a whole number of threads, 0 or more (or absent for no "
                               f"cap); got {cap!r}.")
    return cap


#: ``error_code`` of a row skipped because its job reached ``max_delete_per_run``.
CAP_CODE = "max_delete_per_run"
#: Row statuses that count against the cap: a thread pruned or deleted, or previewed so (a row holds only its
#: own kind's statuses, so one list serves the prune and its dry run).
_CAPPED = (*WRITTEN, "would_prune", "would_delete")


def cap_report(job: Any) -> dict[str, Any] | None:
    """A prune job's cap: ``{"max_delete_per_run", "stopped_at", "skipped"}`` (threads pruned or deleted so
    far, threads left for the next run), or ``None`` when it has no cap."""
    cap = (job.retention or {}).get("max_delete_per_run")
    if cap is None:
        return None
    rows = job.results.all()
    return {"max_delete_per_run": cap, "stopped_at": rows.filter(status__in=_CAPPED).count(),
            "skipped": rows.filter(error_code=CAP_CODE).count()}


def cap_outcome(result: Any) -> ThreadReport | None:
    """The ``skipped`` report of a prune row whose job already reached ``max_delete_per_run``, else ``None``.

    Counted: rows that pruned or deleted (or would), and the job's other rows running now (so concurrent
    rows never pass the cap together; a running row that then prunes nothing leaves the cap under-filled,
    never over).
    """
    job = result.job
    cap = (job.retention or {}).get("max_delete_per_run")
    if cap is None:
        return None
    others = job.results.exclude(pk=result.pk)
    taken = others.filter(status__in=(*_CAPPED, ThreadResult.RUNNING)).count()
    if taken < cap:
        return None
    return ThreadReport(thread_id=result.thread_id, status=ThreadResult.SKIPPED,
                        error=f"Not pruned: the job reached its max_delete_per_run of {plural(cap, 'thread')}.",
                        hint="The cap bounds each run; the next run of the policy (or a new job) continues.")


def _selected_orphans(job: ConversionJob | None) -> bool:
    """Whether ``job`` (or the dry run it was confirmed from, and so on) selected threads as orphans."""
    while job is not None:
        if ((job.selection or {}).get("filter") or {}).get("thread_class") == inventory.ORPHANED:
            return True
        job = job.source_job
    return False


def orphan_refusal(rt: DashboardRuntime, result: ThreadResult) -> ThreadReport | None:
    """The ``skipped`` report of an orphan about to be deleted that is no orphan any more, else ``None``.

    A job that selected orphans (its filter, or its dry run's) deletes a thread only if it still has no
    DeerFlow ``threads_meta`` row and no checkpoint newer than ``DASHBOARD_ORPHAN_MIN_IDLE_S``
    (:func:`deerflow.inventory.deerflow_tables.still_orphaned`), asked inside DeerFlow's reservation just
    before the deletion: a thread DeerFlow adopted since the selection is left as it is.
    """
    if result.job.retention.get("rule") != "delete_threads" or not _selected_orphans(result.job):
        return None
    floor = deerflow_tables.orphan_floor(settings.DASHBOARD_ORPHAN_MIN_IDLE_S)
    if deerflow_tables.still_orphaned(reader_for(rt.saver), result.thread_id, floor):
        return None
    return ThreadReport(thread_id=result.thread_id, status=ThreadResult.SKIPPED,
                        error=f"Thread {result.thread_id} is no orphan any more (DeerFlow has its threads_meta row, "
                              "or it was written since it was selected); not deleted.",
                        hint="Nothing to do: the thread is in use. Run the orphan dry run again to see today's.")


def _prune(rt: DashboardRuntime, thread_id: str, retention: dict[str, Any], *, dry_run: bool,
           note: str) -> PruneReport:
    common = {"dry_run": dry_run, "backup": retention.get("backup", True), "protect": retention.get("protect") or [],
              "note": note}
    if retention["rule"] == "delete_threads":
        return delete_thread(rt.config.database, thread_id, **common)
    return prune_thread(rt.config.database, thread_id, retention["rule"], n=retention.get("keep_last"), **common)


def run_one(rt: DashboardRuntime, thread_id: str, retention: dict[str, Any], *, dry_run: bool, note: str,
            retried: bool = False) -> tuple[ThreadReport, dict[str, Any]]:
    """One prune job row: the preview or the prune of ``thread_id`` by the job's ``retention``.

    A retried row whose earlier attempt committed but died before recording it
    (so this attempt finds ``nothing_to_prune`` or ``not_found``) reports that
    prune, found by the backup carrying the job's ``note``.

    Returns:
        ``(the row's ThreadReport, the row's prune lists)``; see :func:`to_thread_report`.
    """
    report = _prune(rt, thread_id, retention, dry_run=dry_run, note=note)
    if retried and not dry_run and report.status in ("nothing_to_prune", "not_found"):
        mine = [b for b in convert.list_backups(rt.config.database, thread_id)
                if b.note == note and b.status == "active"]
        if mine:
            report.status = "deleted" if retention["rule"] == "delete_threads" else "pruned"
            report.backup_id = mine[0].backup_id
            report.hint = "Pruned by an earlier attempt of this job whose worker stopped before recording it."
    return to_thread_report(report)


def revert_one(rt: DashboardRuntime, backup_id: str) -> tuple[ThreadReport, dict[str, Any]]:
    """Restore a pruned (or deleted) thread from its whole-thread backup (:func:`deerflow.retention.revert_prune`)."""
    return to_thread_report(revert_prune(rt.config.database, backup_id))


def to_thread_report(report: PruneReport) -> tuple[ThreadReport, dict[str, Any]]:
    """The job row's fields of a :class:`PruneReport`: a :class:`ThreadReport` (status, bytes, counts: total =
    kept + deleted, ``checkpoints_to_rewrite`` = deleted, or for a revert the checkpoints it restored) and the
    prune lists stored in ``ThreadResult.prune``."""
    changed = report.restored_checkpoint_ids if report.rule == "revert" else report.deleted_checkpoint_ids
    thread = ThreadReport(
        thread_id=report.thread_id, status=report.status,
        checkpoints_total=len(report.kept_checkpoint_ids) + len(report.deleted_checkpoint_ids),
        checkpoints_to_rewrite=len(changed), bytes_before=report.bytes_before,
        bytes_after=report.bytes_after, first_difference=report.first_difference, backup_id=report.backup_id,
        bytes_freed=report.bytes_before - report.bytes_after, attempts=report.attempts,
        duration_s=report.duration_s, error=report.error, hint=report.hint)
    lists = {key: getattr(report, key) for key in (
        "rule", "kept_checkpoint_ids", "deleted_checkpoint_ids", "protected_checkpoint_ids", "protected",
        "rebased_checkpoint_ids", "unbranchable_checkpoint_ids", "deleted_namespaces")}
    return thread, lists


def is_prune_backup(backup_id: str) -> bool:
    """The backup was written by a prune (a job's ``prune`` row, or ``prune_threads``): a whole-thread backup."""
    if ThreadResult.objects.filter(backup_id=backup_id, job__kind=ConversionJob.Kind.PRUNE).exists():
        return True
    info = next((b for b in convert.list_backups(get_runtime().config.database) if b.backup_id == backup_id), None)
    return info is not None and (info.note.startswith(("prune:", "cli:prune_threads")))


def checkpoint_marks(job_id: int, thread_id: str) -> dict[str, Any] | None:
    """The marks a prune job puts on a thread's checkpoints, for the thread page's tree.

    Returns:
        ``{"job", "result", "marks": {checkpoint_id: {"mark", "words", "reason"}}}`` (``mark`` one of
        :data:`MARK_WORDS`; ``reason`` a :data:`REASON_WORDS` text for protected ones, else ``""``), or
        ``None`` when ``job_id`` is no prune job or has no finished row for the thread.
    """
    result = (ThreadResult.objects.select_related("job")
              .filter(job_id=job_id, thread_id=thread_id,
                      job__kind__in=(ConversionJob.Kind.PRUNE_DRY_RUN, ConversionJob.Kind.PRUNE))
              .exclude(prune={}).first())
    if result is None:
        return None
    lists = result.prune
    marks: dict[str, Any] = {cid: {"mark": "kept", "reason": ""} for cid in lists.get("kept_checkpoint_ids", [])}
    for cid in lists.get("rebased_checkpoint_ids", []):
        marks[cid] = {"mark": "rebased", "reason": "stored as a _DeltaSnapshot so it reads the same without "
                                                   "its deleted ancestors"}
    for p in lists.get("protected", []):
        marks[p["checkpoint_id"]] = {"mark": "protected", "reason": REASON_WORDS.get(p["reason"], p["reason"])}
    unbranchable = set(lists.get("unbranchable_checkpoint_ids", []))
    for cid in lists.get("deleted_checkpoint_ids", []):
        marks[cid] = {"mark": "deleted", "reason": "an older turn of the head's chain: no longer resumable or "
                      "forkable" if cid in unbranchable else ""}
    for mark in marks.values():
        mark["words"] = MARK_WORDS[mark["mark"]]
    return {"job": result.job, "result": result, "marks": marks}
