"""Template helpers for job pages: durations, selections, result classes."""

from __future__ import annotations

from typing import Any

from django import template

from dashboard.jobs.models import ThreadResult
from dashboard.jobs.progress import succeeded
from dashboard.jobs.provenance import revertible as check
from dashboard.jobs.pruning import REASON_WORDS

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """``seconds`` as ``1 h 02 min``, ``3 min 05 s`` or ``12 s``; ``—`` when unknown."""
    if seconds is None:
        return "—"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


@register.filter
def outcome(result) -> str:
    """CSS class of a result row: ``ok``, ``failed``, ``skipped`` or ``open``."""
    if result.status in ThreadResult.OPEN:
        return "open"
    if result.status == ThreadResult.SKIPPED:
        return "skipped"
    return "ok" if succeeded(result.job.kind, result.status) else "failed"


#: Ids listed by :func:`selection_text` before it says how many more there are.
IDS_SHOWN = 20
_LISTS = (("thread_ids", "threads"), ("backup_ids", "backups"))


@register.filter
def selection_text(selection: dict[str, Any] | None) -> str:
    """A job's selection in words: ``threads: a, b``, ``filter: q = f10, mode = delta`` or ``backups: …``.

    Filter criteria left empty are omitted; long id lists end with ``… (N more)``.
    """
    selection = selection or {}
    if selection.get("database"):  # a reclaim job: no threads
        return f"the whole checkpoint database ({selection['database']})"
    for key, label in _LISTS:
        if selection.get(key):
            ids = list(selection[key])
            more = f" … ({len(ids) - IDS_SHOWN} more)" if len(ids) > IDS_SHOWN else ""
            return f"{label}: {', '.join(map(str, ids[:IDS_SHOWN]))}{more}"
    criteria = {k: v for k, v in (selection.get("filter") or {}).items() if v not in (None, "")}
    if "filter" in selection:
        return "filter: " + (", ".join(f"{k} = {v}" for k, v in criteria.items()) or "none (every delta thread)")
    return "—"


#: Result status -> (words, meaning). Meanings: ``success``, ``action`` (needs an operator's next step),
#: ``error``, ``open`` (not run yet), ``skipped``. The raw status stays in the row's ``data-status``.
STATUS_WORDS = {
    "pending": ("waiting", "open"),
    "queued": ("queued", "open"),
    "running": ("running", "open"),
    "skipped": ("skipped (cancelled before it ran)", "skipped"),
    "refused": ("refused by the worker", "error"),
    "error": ("error", "error"),
    "already_full": ("already full: nothing to do", "success"),
    "needs_conversion": ("needs conversion", "action"),
    "blocked": ("blocked: cannot be converted safely", "error"),
    "integrity_mismatch": ("integrity check failed", "error"),
    "converted": ("converted", "success"),
    "reverted": ("reverted", "success"),
    "verification_failed": ("verification failed: rolled back", "error"),
    "changed_during_conversion": ("changed while converting: rolled back, retry", "action"),
    "not_found": ("thread not found", "error"),
    "already_delta": ("already delta: nothing to compact", "success"),
    "needs_compaction": ("needs compaction", "action"),
    "compacted": ("compacted to delta", "success"),
    "would_prune": ("would be pruned", "action"),
    "would_delete": ("would be deleted whole", "action"),
    "nothing_to_prune": ("nothing to prune", "success"),
    "reclaimed": ("space reclaimed", "success"),
    "pruned": ("pruned", "success"),
    "deleted": ("deleted whole", "success"),
    "changed_during_prune": ("changed while pruning: rolled back, retry", "action"),
    "branch_ambiguous": ("ambiguous sibling forks: refused unless acknowledged", "action"),
    "run_in_flight": ("DeerFlow run in flight: not touched, retry later", "action"),
}


@register.filter
def status_words(status: str) -> str:
    """A result status in words (``needs_conversion`` -> ``needs conversion``); unknown ones with ``_`` as spaces."""
    return STATUS_WORDS.get(status, (str(status).replace("_", " "), ""))[0]


@register.filter
def status_meaning(status: str) -> str:
    """What a status means for the operator: ``success``, ``action``, ``error``, ``open`` or ``skipped``."""
    return STATUS_WORDS.get(status, ("", "action"))[1]


@register.filter
def finding_severity(finding: dict[str, Any]) -> str:
    """A materializer finding's severity: ``error`` when it blocks the conversion, else ``warning``."""
    return "error" if finding.get("blocking") else "warning"


@register.filter
def runner_words(runner: str) -> str:
    """How a job runs, in words: ``celery`` -> ``on Celery workers``, ``inline`` -> ``inline (management command)``."""
    return {"celery": "on Celery workers", "inline": "inline (management command)"}.get(runner, runner)


@register.filter
def revertible(result) -> bool:
    """See :func:`dashboard.jobs.provenance.revertible`."""
    return check(result)


@register.filter
def rule_words(rule: str, n: int | None = None) -> str:
    """A prune rule in words: ``keep_last`` + 10 -> ``keep the last 10 checkpoints of each head's chain``."""
    if rule == "keep_last":
        return f"keep the last {n} checkpoint{'' if n == 1 else 's'} of each head's chain (plus the protected set)"
    return {"safe_only": "only the provably safe shapes (trailing duration-only leaves, leaf sibling branches)",
            "delete_threads": "delete the threads whole"}.get(rule, rule)


@register.filter
def prune_list(result, key: str) -> list:
    """One list of a prune row (``ThreadResult.prune[key]``), ``[]`` when absent."""
    return (getattr(result, "prune", None) or {}).get(key, [])


@register.filter
def reason_words(reason: str) -> str:
    """Why a checkpoint is protected, in words (:data:`dashboard.jobs.pruning.REASON_WORDS`)."""
    return REASON_WORDS.get(reason, reason)


@register.filter
def freed(result) -> int:
    """Bytes a row frees: ``bytes_before - bytes_after`` (0 when it grows)."""
    return max(result.bytes_before - result.bytes_after, 0)


@register.filter
def delete_cap(job) -> dict | None:
    """A prune job's ``max_delete_per_run`` report (:func:`dashboard.jobs.pruning.cap_report`), or ``None``."""
    from dashboard.jobs.pruning import cap_report

    return cap_report(job)


@register.filter
def totals_words(job, checkpoints: int) -> str:
    """``{{ job|totals_words:n }}``: see :func:`dashboard.jobs.words.totals_text`."""
    from dashboard.jobs.words import totals_text

    return totals_text(job.kind, checkpoints)


@register.simple_tag
def nothing_found(job, found: Any, noun: str) -> str:
    """``{% nothing_found job convertible "conversion" %}``: see :func:`dashboard.jobs.words.outcome_sentence`."""
    from dashboard.jobs.words import outcome_sentence

    return outcome_sentence(job, len(found or ()), noun)
