"""The confirmation pages before a writing job, Django-admin style.

* ``/jobs/<dry run id>/confirm``: before "Convert to full" (a ``dry_run``) or
  "Compact to delta" (a ``compact_dry_run``). It lists every thread the job
  would rewrite with its checkpoints and bytes now → after (the dry run's
  estimate), the growth factor, and marks the outliers; it says what the job
  keeps (a backup per thread, revertible until purged) and what cannot be
  undone. Its button posts to ``/jobs/<id>/convert`` or ``/jobs/<id>/compact``
  (the same forms as the dry run's page), which redirect to the new job.
* ``/jobs/<job id>/revert``: before reverting a finished conversion or
  compaction: every backup the revert restores, with the thread's size now and
  the backup's; its button posts ``action=revert`` to ``/jobs/<id>/action``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from dashboard.accounts.auth import staff_required
from dashboard.errors import ErrorView, error_page
from dashboard.errors.outages import OUTAGES, is_outage
from dashboard.jobs import compaction, kinds, services
from dashboard.jobs.charts import GROWTH_OUTLIER, SIZE_OUTLIER, confirm_rows
from dashboard.jobs.forms import ConfirmCompactForm, ConfirmConvertForm
from dashboard.jobs.models import ConversionJob
from dashboard.runtime import get_runtime
from dashboard.threads import services as thread_services
from deerflow.convert import BackupInfo, list_backups

__all__ = ["RevertRow", "confirm_page", "convert_confirm", "revert_confirm"]

#: The form each writing kind confirmed on this module's page posts (the prune's page is :mod:`prune_views`).
_FORMS: dict[str, type[Form]] = {ConversionJob.Kind.CONVERT: ConfirmConvertForm,
                                 ConversionJob.Kind.COMPACT: ConfirmCompactForm}

@require_GET
@staff_required
def convert_confirm(request: HttpRequest, job_id: int) -> HttpResponse:
    """The confirmation page of a finished dry run's conversion, or of a finished compaction dry run's
    compaction (any staff may read it; the button needs ``jobs.manage_conversions``, like the form it posts).

    Answers 404 for an unknown job, 409 for a job that is not a finished dry run of either kind.
    """
    dry_run = get_object_or_404(ConversionJob, pk=job_id)
    if _writer(dry_run) is None or not dry_run.finished:
        return error_page(request, ErrorView(409, "not_a_finished_dry_run",
                                             f"Job {dry_run.pk} is not a finished dry run: "
                                             "there is no estimate to confirm.",
                                             "Open a finished dry run's page and use its Convert or Compact button."))
    template, context = confirm_page(dry_run)
    return render(request, template, context)


def _writer(dry_run: ConversionJob) -> kinds.JobKind | None:
    """The writing kind ``dry_run`` previews, when it is confirmed on this module's page."""
    writes = kinds.get(dry_run.kind).dry_run_of
    return kinds.get(writes) if writes in _FORMS else None


def confirm_page(dry_run: ConversionJob, form=None, error: ErrorView | None = None) -> tuple[str, dict]:
    """The template and context of the confirmation page of finished dry run ``dry_run`` (a ``dry_run`` or a
    ``compact_dry_run``); ``form`` is a bound form that failed (shown with its field errors), ``error`` a refusal
    of the posted job (shown above the button)."""
    writer = _writer(dry_run)
    assert writer is not None and writer.confirmation is not None, f"{dry_run.kind} is confirmed elsewhere"
    results = list(dry_run.results.filter(status__in=writer.would_write))
    before = sum(r.bytes_before for r in results)
    after = sum(r.bytes_after for r in results)
    context = {
        "job": dry_run, "rows": confirm_rows(results), "before": before, "after": after,
        "growth": after / before if before else None, "growth_outlier": GROWTH_OUTLIER, "size_outlier": SIZE_OUTLIER,
        "checkpoints": sum(r.checkpoints_rewritten for r in results),
        "over_limit": dry_run.size_limit_bytes is not None and after > dry_run.size_limit_bytes,
        "confirm_form": form or _FORMS[writer.name](initial={"throttle_delay_s": 0, "max_in_flight": 1}),
        "confirm_error": error}
    if writer.needs_delta_fleet:
        context.update(freed=before - after, full_mode_processes=compaction.full_mode_processes())
    return writer.confirmation.template, context


@dataclass(frozen=True)
class RevertRow:
    """One backup a revert restores: the backup (thread, rows, bytes) and the thread's size now in bytes
    (``None`` when it cannot be read)."""

    backup: BackupInfo
    bytes_now: int | None


@require_GET
@staff_required
def revert_confirm(request: HttpRequest, job_id: int) -> HttpResponse:
    """``/jobs/<id>/revert``: the threads and backups a revert of finished job ``job_id`` restores.

    Answers 404 for an unknown job, 409 when the job is not a finished conversion, compaction or prune,
    or when none of its backups is still active (all restored or purged).
    """
    job = get_object_or_404(ConversionJob, pk=job_id)
    if not kinds.get(job.kind).revertible or not job.finished:
        return error_page(request, ErrorView(409, "not_revertible",
                                             f"Job {job.pk} is not a finished conversion, compaction or prune: "
                                             "there is nothing to revert.",
                                             "Open the page of a finished convert, compact or prune job."))
    try:
        active = set(services.active_backups(job))
        backups = [b for b in list_backups(get_runtime().config.database) if b.backup_id in active]
    except OUTAGES as exc:
        if not is_outage(exc):
            raise
        return error_page(request, ErrorView(503, "checkpoint_database_unavailable",
                                             f"The checkpoint database cannot be read: {exc}",
                                             "Retry when it is back; nothing was written."))
    if not backups:
        return error_page(request, ErrorView(409, "nothing_to_revert",
                                             f"Job {job.pk}'s backups were all restored or purged: "
                                             "there is nothing left to revert.",
                                             "The backups page shows each backup's status."))
    rows = []
    for b in sorted(backups, key=lambda b: b.thread_id):
        summary = thread_services.exact_summary_or_none(get_runtime(), b.thread_id)
        rows.append(RevertRow(b, summary.bytes_total if summary else None))
    needed = kinds.job_permissions(job)
    return render(request, "jobs/revert_job_confirm.html", {
        "job": job, "kind_spec": kinds.get(job.kind), "rows": rows, "permission": " and ".join(sorted(needed)),
        "may_revert": kinds.missing_permission(request.user, needed) is None,
        "backup_bytes": sum(r.backup.bytes for r in rows),
        "bytes_now": sum(r.bytes_now or 0 for r in rows),
        "checkpoint_rows": sum(r.backup.checkpoint_rows for r in rows)})
