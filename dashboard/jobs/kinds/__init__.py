"""The job-kind registry: what each kind of job is, asked by views, API, forms, tasks and templates.

One module per kind (``convert``: ``dry_run`` and ``convert``; ``compact``:
``compact_dry_run`` and ``compact``; ``prune``: ``prune_dry_run`` and
``prune``; ``revert``; ``reclaim``) declares a :class:`JobKind`: its
permission, worker mode, whether it writes stored threads, what it selects,
its confirmation page, its report's words, its success statuses and its
dispatch (the function that runs one row). :mod:`~dashboard.jobs.kinds.permissions`
decides who may act on a job or a backup from the kind that made it. Nothing
else in the dashboard branches on a job's kind.

Laws::

    get(k).name == k                                   for every k in ConversionJob.Kind
    get(get(w).estimated_by).dry_run_of == w            for every writing kind w with a dry run
    get(k).writes_threads  =>  the rows of k are backed up, verified, revertible, reserved
"""

from __future__ import annotations

from dashboard.jobs.kinds.base import (
    MANAGE_CONVERSIONS,
    MANAGE_RETENTION,
    Confirmation,
    Dispatch,
    JobKind,
    Outcome,
    Selects,
    Words,
    WorkerMode,
)
from dashboard.jobs.kinds.permissions import (
    JOB_PERMISSIONS,
    backup_maker_kinds,
    backup_permissions,
    job_permissions,
    kind_permission,
    launch_permissions,
    may_run_jobs,
    missing_permission,
    refusal,
)
from dashboard.jobs.kinds.registry import KINDS, dry_runs, get, writing_kinds

__all__ = [
    "JOB_PERMISSIONS",
    "KINDS",
    "MANAGE_CONVERSIONS",
    "MANAGE_RETENTION",
    "Confirmation",
    "Dispatch",
    "JobKind",
    "Outcome",
    "Selects",
    "WorkerMode",
    "Words",
    "backup_maker_kinds",
    "backup_permissions",
    "dry_runs",
    "get",
    "job_permissions",
    "kind_permission",
    "launch_permissions",
    "may_run_jobs",
    "missing_permission",
    "refusal",
    "writing_kinds",
]
