"""The table of job kinds (:data:`KINDS`) and its look-ups."""

from __future__ import annotations

from dashboard.jobs.kinds.base import JobKind
from dashboard.jobs.kinds.compact import COMPACT, COMPACT_DRY_RUN
from dashboard.jobs.kinds.convert import CONVERT, DRY_RUN
from dashboard.jobs.kinds.prune import PRUNE, PRUNE_DRY_RUN
from dashboard.jobs.kinds.reclaim import RECLAIM
from dashboard.jobs.kinds.revert import REVERT

__all__ = ["KINDS", "dry_runs", "get", "writing_kinds"]

#: Every job kind by its ``ConversionJob.kind`` value.
KINDS: dict[str, JobKind] = {k.name: k for k in (DRY_RUN, CONVERT, COMPACT_DRY_RUN, COMPACT, PRUNE_DRY_RUN, PRUNE,
                                                   REVERT, RECLAIM)}


def get(kind: str) -> JobKind:
    """The declaration of ``kind``.

    Raises:
        KeyError: no such kind (the model's choices and the forms refuse one before it gets here).
    """
    return KINDS[kind]


def dry_runs() -> tuple[JobKind, ...]:
    """The kinds that preview a writing kind (and write nothing)."""
    return tuple(k for k in KINDS.values() if k.is_dry_run)


def writing_kinds() -> tuple[JobKind, ...]:
    """The kinds whose jobs write backups a revert restores (convert, compact, prune)."""
    return tuple(k for k in KINDS.values() if k.revertible)
