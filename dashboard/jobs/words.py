"""What each job kind says it did, in its own terms (the job page's totals line and outcome sentence).

A dry run *would* rewrite (or delete); a conversion rewrote; a reclaim vacuumed a database and has no
threads, rate or integrity check to speak of. A job that ended without a usable result (failed,
cancelled) never reads as a no-op: :func:`outcome_sentence` says what happened instead of "nothing to do".
"""

from __future__ import annotations

from typing import Any

from dashboard.formatting import plural
from dashboard.jobs import kinds

__all__ = ["outcome_sentence", "totals_text"]

def totals_text(kind: str, checkpoints: int) -> str:
    """The totals line's first part: ``152 checkpoints would be rewritten`` (a dry run), ``1 checkpoint
    deleted`` (a prune), in the kind's words (:attr:`dashboard.jobs.kinds.Words.totals`); ``""`` for a kind
    that counts no checkpoints (a reclaim)."""
    verb = kinds.get(kind).words.totals
    return f"{plural(checkpoints or 0, 'checkpoint')} {verb}" if verb else ""


#: Terminal job states whose results are not a verdict on the threads.
_UNUSABLE = {"failed": "failed", "cancelled": "was cancelled", "partially_failed": "failed for some threads"}


def outcome_sentence(job: Any, found: int, noun: str) -> str:
    """A finished dry run's verdict when it found no thread to act on: the no-op sentence only when the job
    succeeded; otherwise what went wrong (so a failed job never reads as "nothing needs doing").

    Args:
        job: a :class:`dashboard.jobs.models.ConversionJob` (its ``state``).
        found: threads the dry run found to act on (count).
        noun: what the follow-up does, as a noun (``conversion``, ``compaction``).
    """
    if found:
        return ""
    if job.state in _UNUSABLE:
        return (f"This dry run {_UNUSABLE[job.state]}: its results say nothing about which threads need {noun}. "
                "See the problems in the table below, fix them, then retry the job.")
    return f"No thread of this dry run needs {noun}."
