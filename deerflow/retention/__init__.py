"""Retention: previewed, verified, revertible pruning of checkpoint history, delta threads included.

Public entry points (each works on one thread, so a Celery task can call it
with a thread id): :func:`keep_last`, :func:`safe_only`, :func:`prune_thread`
(and :func:`prune_threads`, many threads on one connection, a keep-last batch
in one transaction where the kept checkpoints' bytes prove their readings),
:func:`delete_thread` / :func:`delete_threads` and :func:`revert_prune`; the
database's space is given back afterwards by :func:`deerflow.convert.reclaim_space`
(the same reclaim compaction uses). See ``docs/retention.md``.
"""

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports

#: Each public name's submodule: imported when the name is first read (:mod:`deerflow._lazy`).
_EXPORTS = {
    "delete_thread": "deletion", "delete_threads": "deletion",
    "REASONS": "plan", "Plan": "plan", "plan_keep_last": "plan", "plan_safe_only": "plan",
    "keep_last": "prune", "prune_thread": "prune", "safe_only": "prune", "prune_threads": "batch",
    "STATUSES": "report", "PruneReport": "report",
    "revert_prune": "revert", "select_threads": "selection",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from deerflow.retention.batch import prune_threads
    from deerflow.retention.deletion import delete_thread, delete_threads
    from deerflow.retention.plan import REASONS, Plan, plan_keep_last, plan_safe_only
    from deerflow.retention.prune import keep_last, prune_thread, safe_only
    from deerflow.retention.report import STATUSES, PruneReport
    from deerflow.retention.revert import revert_prune
    from deerflow.retention.selection import select_threads

__all__ = [
    "Plan",
    "PruneReport",
    "REASONS",
    "STATUSES",
    "delete_thread",
    "delete_threads",
    "keep_last",
    "plan_keep_last",
    "plan_safe_only",
    "prune_thread",
    "prune_threads",
    "revert_prune",
    "safe_only",
    "select_threads",
]
