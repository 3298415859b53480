"""Who may act on a job or a backup: the permission of the kind of job that made it, decided here alone.

Rules (every route, HTML and JSON, asks these functions):

* launching a job of kind K needs ``K.permission``; a revert needs instead the
  permission of the job it undoes (``estimate_job``) or of the jobs that wrote
  the backups it restores (``backup_ids``): undoing a prune is a prune's business;
* pause, resume, cancel, retry and revert of a job need the permission of its
  kind, a revert job's that of the jobs whose backups it restores;
* reverting or purging one backup needs the permission of the kind that wrote
  it (purging a prune's backup makes the prune irreversible);
* a backup no job of this dashboard wrote is a prune's when its note says so
  (``prune:`` or ``cli:prune_threads``), else a conversion's.

Several permissions may be needed at once (a revert of backups written by a
conversion and by a prune): the user must hold every one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dashboard.errors import ErrorView
from dashboard.jobs.kinds.base import MANAGE_CONVERSIONS, MANAGE_RETENTION
from dashboard.jobs.kinds.registry import KINDS
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.runtime import get_runtime
from deerflow.convert import list_backups

__all__ = ["JOB_PERMISSIONS", "backup_maker_kinds", "backup_permissions", "job_permissions", "kind_permission",
           "launch_permissions", "may_run_jobs", "missing_permission", "refusal"]

#: Every permission that lets a user act on some job.
JOB_PERMISSIONS = (MANAGE_CONVERSIONS, MANAGE_RETENTION)
#: Backup notes of retention's own writers (a job's ``prune:`` note or the ``prune_threads`` command).
_PRUNE_NOTES = ("prune:", "cli:prune_threads")


def kind_permission(kind: str) -> str:
    """The permission a job of ``kind`` declares (:data:`MANAGE_CONVERSIONS` for an unknown kind)."""
    spec = KINDS.get(kind)
    return spec.permission if spec is not None else MANAGE_CONVERSIONS


def backup_maker_kinds(backup_ids: Iterable[str]) -> dict[str, str]:
    """``{backup_id: kind}`` of the job that wrote each backup (never a revert, which only restores one).

    A backup without such a row (written by a command outside the jobs) is a ``prune``'s when its note names
    retention, else a ``convert``'s; an unknown id is a ``convert``'s (the caller's own lookup answers 404).
    """
    ids = list(dict.fromkeys(b for b in backup_ids if isinstance(b, str) and b))
    writers = KINDS
    found = dict(ThreadResult.objects.filter(backup_id__in=ids)
                 .exclude(job__kind__in=[k for k, s in writers.items() if s.permission_from_source])
                 .values_list("backup_id", "job__kind"))
    rest = [b for b in ids if b not in found]
    if rest:
        notes = {b.backup_id: b.note for b in list_backups(get_runtime().config.database) if b.backup_id in rest}
        for b in rest:
            pruned = notes.get(b, "").startswith(_PRUNE_NOTES)
            found[b] = ConversionJob.Kind.PRUNE if pruned else ConversionJob.Kind.CONVERT
    return found


def backup_permissions(backup_ids: Iterable[str]) -> frozenset[str]:
    """The permissions reverting or purging these backups needs: those of the kinds that wrote them."""
    return frozenset(kind_permission(k) for k in backup_maker_kinds(backup_ids).values())


def job_permissions(job: ConversionJob) -> frozenset[str]:
    """The permissions acting on ``job`` needs (pause, resume, cancel, retry, revert).

    A revert takes those of the job it undoes, or of the jobs that wrote the backups its rows restore.
    """
    spec = KINDS.get(job.kind)
    if spec is None or not spec.permission_from_source:
        return frozenset({kind_permission(job.kind)})
    if job.source_job is not None:
        return job_permissions(job.source_job)
    backups = list(job.results.exclude(backup_id="").values_list("backup_id", flat=True))
    return backup_permissions(backups) or frozenset({spec.permission})


def launch_permissions(kind: str, source_job: ConversionJob | None = None,
                       selection: dict[str, Any] | None = None) -> frozenset[str]:
    """The permissions launching a job of ``kind`` needs, from ``source_job`` or the ``selection`` it names.

    ``selection`` may be unvalidated input: only a list of strings under ``backup_ids`` is looked at.
    """
    spec = KINDS.get(kind)
    if spec is None or not spec.permission_from_source:
        return frozenset({kind_permission(kind)})
    if source_job is not None:
        return job_permissions(source_job)
    ids = (selection or {}).get("backup_ids")
    if isinstance(ids, list) and ids:
        return backup_permissions(b for b in ids if isinstance(b, str)) or frozenset({spec.permission})
    return frozenset({spec.permission})


def missing_permission(user: Any, needed: Iterable[str]) -> str | None:
    """The first of ``needed`` (sorted) that ``user`` lacks, or ``None`` when the user holds them all."""
    return next((p for p in sorted(needed) if not user.has_perm(p)), None)


def may_run_jobs(user: Any) -> bool:
    """``user`` holds some job permission (else refused before any lookup)."""
    return any(user.has_perm(p) for p in JOB_PERMISSIONS)


def refusal(permission: str | None = None) -> ErrorView:
    """The 403 of a user without ``permission`` (``None``: a user without any job permission), with whom to ask
    for what."""
    if permission is None:
        return ErrorView(403, "permission_denied", "You may view jobs but not run them.",
                         f"Ask an administrator for the permission {MANAGE_CONVERSIONS} (conversions, compactions, "
                         f"reclaims) or {MANAGE_RETENTION} (pruning).")
    if permission == MANAGE_RETENTION:
        return ErrorView(403, "permission_denied", "You may view jobs but not prune: pruning deletes checkpoint "
                         "history (and only its holders may undo a prune or purge its backups), which running "
                         "conversions does not include.",
                         f"Ask an administrator for the permission {MANAGE_RETENTION} "
                         "(deleting is not converting).")
    return ErrorView(403, "permission_denied", "You may view jobs but not run them.",
                     f"Ask an administrator for the permission {permission}.")
