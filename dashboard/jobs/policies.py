"""Retention policies: saved selection + rule, run by Celery beat when their crontab falls due.

Celery beat sends ``jobs.run_due_policies`` every minute (``CELERY_BEAT_SCHEDULE``,
``settings.py``); it calls :func:`run_due_policies`, which asks Celery's own
:class:`celery.schedules.crontab` whether each enabled policy is due since its
last run, and starts a normal ``prune`` job for each due one
(:func:`run_policy`: runner ``celery``, launched by ``policy:<name>``,
confirmed by the saved policy, the rule stored on the job). Policies are off
by default (``enabled=False``).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from dashboard.accounts.models import AuditEntry
from dashboard.errors.jobs import JobError
from dashboard.jobs import services
from dashboard.jobs.creation import JobOptions
from dashboard.jobs.models import Kind, RetentionPolicy
from dashboard.jobs.schedules import InvalidSchedule, is_due

__all__ = ["policy_selection", "run_due_policies", "run_policy", "settle_run"]

log = logging.getLogger("dashboard.jobs")


def policy_selection(policy: Any) -> dict[str, Any]:
    """The job selection of a policy: its filter plus ``idle_days`` (``{"mode": "any"}``: every thread)."""
    chosen = {k: v for k, v in (policy.filter or {}).items() if v not in (None, "")}
    if policy.idle_days is not None:
        chosen["idle_days"] = policy.idle_days
    return {"filter": {"mode": "any", **chosen}}


def run_policy(policy: Any, now: dt.datetime | None = None) -> Any:
    """Start the policy's prune job now (whether due or not); record the run on the policy.

    Returns:
        The :class:`~dashboard.jobs.models.ConversionJob`, or ``None`` when no job could be made (no thread
        matched, a bad rule, a read-only database): ``last_error`` says why.
    """

    now = now or timezone.now()
    job, error = None, ""
    retention = {"rule": policy.rule, "keep_last": policy.keep_last, "protect": policy.protect or [],
                 "backup": policy.backup, "max_delete_per_run": policy.max_delete_per_run}
    try:
        with transaction.atomic():
            job = services.create_job(None, Kind.PRUNE, policy_selection(policy),
                                      JobOptions(confirmed=True, runner="celery",
                                      launched_by=f"policy:{policy.name}", retention=retention))
            # Recorded before the dispatch leaves (on commit): a job that finishes at once finds its policy.
            type(policy).objects.filter(pk=policy.pk).update(last_run_at=now, last_job=job, last_error="")
            services.launch(job)
    except JobError as exc:
        error = f"{exc.detail} {exc.hint}".strip()
        log.warning("retention policy %s made no job: %s", policy.name, exc.detail)
        type(policy).objects.filter(pk=policy.pk).update(last_run_at=now, last_job=None, last_error=error)
    AuditEntry.objects.create(user=None, username=f"policy:{policy.name}"[:150], via="policy", method="RUN",
                              path=f"/jobs/policies/{policy.pk}/"[:2048], action="jobs:policy-run",
                              status=201 if job is not None else 400)
    return job


#: Result statuses of a policy's prune thread that changed nothing.
_NOTHING_DONE = ("nothing_to_prune",)


def settle_run(job: Any) -> bool:
    """A policy's prune job that finished having pruned nothing becomes a run on the policy, not a job.

    A due policy whose threads hold nothing to prune would otherwise leave an empty job behind on every
    tick (bytes before = bytes after). The job and its rows are deleted and the policy's last run keeps no
    job and no error (the policies page reads that as "nothing to prune"). Any other job is left alone.

    Args:
        job: a just-finished :class:`~dashboard.jobs.models.ConversionJob`.

    Returns:
        Whether the job was folded into its policy's run.
    """
    from dashboard.jobs.models import RetentionPolicy

    if job.kind != "prune" or job.state != "succeeded" or not job.launched_by.startswith("policy:"):
        return False
    if job.results.exclude(status__in=_NOTHING_DONE).exists():
        return False
    with transaction.atomic():
        RetentionPolicy.objects.filter(last_job=job).update(last_job=None, last_error="")
        job.delete()
    log.info("retention policy run %s pruned nothing: recorded on the policy, job %s removed", job.launched_by,
             job.pk)
    return True


def run_due_policies(now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Run every enabled policy that is due (what beat's ``jobs.run_due_policies`` calls every minute).

    A policy whose schedule cannot be read is skipped with its error recorded. Each due policy is claimed
    by a conditional UPDATE of its ``last_run_at`` first, so overlapping runs of the task start it once. A
    policy whose run raises is recorded with the error on its row and the next policies still run.

    Returns:
        ``[{"policy", "job_id", "error"}]`` for the policies that ran (``job_id`` ``None`` when none was made).
    """

    now = now or timezone.now()
    out = []
    for policy in RetentionPolicy.objects.filter(enabled=True):
        try:
            due = is_due(policy, now)
        except InvalidSchedule as exc:
            RetentionPolicy.objects.filter(pk=policy.pk).update(last_error=str(exc))
            continue
        if not due:
            continue
        # Claim the run with a conditional UPDATE: of two overlapping runs of the beat task, one starts the job.
        if not RetentionPolicy.objects.filter(pk=policy.pk, last_run_at=policy.last_run_at).update(last_run_at=now):
            continue
        try:
            job = run_policy(policy, now)
        except Exception as exc:  # one broken policy must not stop the others: its row says why
            log.exception("retention policy %s failed", policy.name)
            RetentionPolicy.objects.filter(pk=policy.pk).update(
                last_error=f"This run failed: {type(exc).__name__}: {exc}"[:2000])
            out.append({"policy": policy.name, "job_id": None, "error": f"{type(exc).__name__}: {exc}"})
            continue
        policy.refresh_from_db(fields=["last_error"])
        out.append({"policy": policy.name, "job_id": job.pk if job else None, "error": policy.last_error})
    return out
