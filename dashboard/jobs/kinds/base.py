"""What a job kind declares (:class:`JobKind`), and the outcome its dispatch returns (:class:`Outcome`).

A kind module (``convert``, ``compact``, ``prune``, ``revert``, ``reclaim``)
builds one :class:`JobKind` per kind it defines; :mod:`dashboard.jobs.kinds`
collects them. Nothing else in the dashboard decides by a job's kind: it asks
the kind's declaration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from deerflow import convert

if TYPE_CHECKING:
    from dashboard.jobs.models import ThreadResult
    from dashboard.runtime import DashboardRuntime

__all__ = ["MANAGE_CONVERSIONS", "MANAGE_RETENTION", "Confirmation", "Dispatch", "JobKind", "Outcome", "Selects",
           "WorkerMode", "Words"]

#: Launching and acting on conversions, compactions and reclaims, and their backups.
MANAGE_CONVERSIONS = "jobs.manage_conversions"
#: Launching and acting on prune jobs and their backups, and editing retention policies (deleting is not converting).
MANAGE_RETENTION = "jobs.manage_retention"


class WorkerMode(StrEnum):
    """Which frozen checkpoint mode a worker needs to run a row of the kind."""

    #: Only a delta-mode worker: it reads both modes' history (compaction, retention, revert's replay check).
    DELTA = "delta"
    #: The thread's own mode: a full-mode worker runs a full thread and refuses a delta one (the spec's 409).
    THREAD = "thread"
    #: Any worker: the row is no thread (a reclaim vacuums the database).
    ANY = "any"


class Selects(StrEnum):
    """What a job of the kind selects (:mod:`dashboard.jobs.selection`)."""

    #: ``thread_ids`` or a ``filter`` whose mode defaults to ``delta`` (only delta threads need it).
    DELTA_THREADS = "delta_threads"
    #: ``thread_ids`` or a ``filter`` over both modes (``"mode": "any"`` by default).
    ANY_THREADS = "any_threads"
    #: ``backup_ids``: the backups a revert restores.
    BACKUPS = "backups"
    #: The whole checkpoint database (one row, no thread).
    DATABASE = "database"


@dataclass
class Outcome:
    """What running one row gave: the report recorded on the row, an error code, a prune's per-thread lists, and
    what was done beside DeerFlow (its reservation, its history cache: ``ThreadResult.deerflow``)."""

    report: convert.ThreadReport
    code: str = ""
    prune: dict[str, Any] = field(default_factory=dict)
    deerflow: dict[str, Any] = field(default_factory=dict)


#: Runs one row of a job: ``(runtime, result row with its job, backup note "dashboard job <id>") -> Outcome``.
Dispatch = Callable[["DashboardRuntime", "ThreadResult", str], Outcome]


@dataclass(frozen=True)
class Words:
    """A kind's words on the pages.

    Attributes:
        totals: what happened to the checkpoints the totals count, in the kind's own terms (``would be
            rewritten`` for a dry run, ``deleted`` for a prune...); ``""``: the kind counts no checkpoints.
        written: the participle of a thread it rewrote (``converted``...), for "Revert <written> threads…".
        needed: the noun of what its dry run finds (``conversion``...), for "found no thread that needs ...".
        chart: a dry run's growth chart title.
        undone: a writing kind: what reverting its job brings back (the revert confirmation page).
    """

    totals: str = "rewritten"
    written: str = ""
    needed: str = ""
    chart: str = "Growth per thread"
    undone: str = ""


@dataclass(frozen=True)
class Confirmation:
    """The page a writing kind is confirmed on, from its finished dry run.

    Attributes:
        page: the URL name of the confirmation page (``GET``, any staff), e.g. ``jobs:confirm``.
        post: the URL name its button posts to (the writing job starts there).
        template: the page's template.
    """

    page: str
    post: str
    template: str


@dataclass(frozen=True)
class JobKind:
    """Everything the dashboard asks of a job kind.

    Attributes:
        name: the :class:`ConversionJob.Kind` value stored in ``ConversionJob.kind``.
        permission: the permission (``app_label.codename``) to launch it and act on its jobs and backups; a
            revert (``permission_from_source``) needs instead the permission of the kind that wrote its backups.
        worker_mode: which worker may run its rows (:class:`WorkerMode`).
        writes_threads: its rows rewrite stored threads (backed up, verified, revertible, DeerFlow's reservation).
        selects: what its selection names (:class:`Selects`).
        dispatch: runs one of its rows (:data:`Dispatch`).
        success: the row statuses that count as success.
        words: :class:`Words`.
        dry_run_of: a dry run: the writing kind it estimates (``None`` otherwise).
        estimated_by: a writing kind: its dry-run kind (a launch without one needs an explicit confirmation).
        would_write: a writing kind: the statuses of its dry run's rows it rewrites.
        written: the statuses of rows whose thread it rewrote (and whose backup a revert restores).
        committed_status: the status recorded when a time limit cut a row whose rewrite had committed (its
            backup, noted with the job, proves it), or ``""`` when the kind has no such proof.
        confirmation: a writing kind confirmed from its dry run's preview (:class:`Confirmation`), or ``None``.
        growth_chart: a finished dry run of the kind draws the growth of its ``would_write`` rows.
        offers_reclaim: a finished job of the kind that wrote a thread offers "Reclaim disk space…".
        permission_from_source: its jobs and backups take the permission of the job that wrote the backups.
        carries_retention: its jobs carry a retention rule (``ConversionJob.retention``).
        size_limited: a kind whose estimate is held against the job's size limit (``size_limit_bytes``): the
            writing job above it must be confirmed explicitly (a conversion grows threads).
        preview_template: a dry run: the fragment its finished job page shows (the estimate and its button).
        needs_delta_fleet: its rewrite leaves threads only delta-mode processes read: refused while a live
            full-mode process is registered, unless forced (``force_full_fleet``).
    """

    name: str
    permission: str
    worker_mode: WorkerMode
    writes_threads: bool
    selects: Selects
    dispatch: Dispatch
    success: tuple[str, ...]
    words: Words = Words()
    dry_run_of: str | None = None
    estimated_by: str | None = None
    would_write: tuple[str, ...] = ()
    written: tuple[str, ...] = ()
    committed_status: str = ""
    confirmation: Confirmation | None = None
    growth_chart: bool = False
    offers_reclaim: bool = False
    permission_from_source: bool = False
    carries_retention: bool = False
    needs_delta_fleet: bool = False
    size_limited: bool = False
    preview_template: str = ""

    @property
    def selects_threads(self) -> bool:
        """Its rows are threads (or their backups): not a whole-database kind like a reclaim."""
        return self.selects != Selects.DATABASE

    @property
    def is_dry_run(self) -> bool:
        """It previews a writing kind and writes nothing."""
        return self.dry_run_of is not None

    @property
    def revertible(self) -> bool:
        """Its finished jobs can be reverted from the backups they wrote."""
        return bool(self.written) and not self.permission_from_source
