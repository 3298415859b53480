"""One backup's actions, each after a confirmation page: revert its thread, or purge it.

* ``/jobs/backups/revert``: ``GET ?backup_id=`` is the confirmation (the
  thread, the backup's rows and bytes against the thread's current size, what
  the revert replaces and what it keeps); ``POST`` starts a revert job for that
  backup and redirects to the job (so no POST URL stays in the address bar).
* ``/jobs/backups/purge``: ``GET ?backup_id=`` is the confirmation (what is
  lost: the ability to revert; the bytes freed); ``POST`` (with ``confirm``)
  deletes the backup's rows and redirects to the backups page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from dashboard.accounts.auth import staff_required
from dashboard.errors import ErrorView, error_page
from dashboard.errors.jobs import JobError
from dashboard.jobs import kinds, services
from dashboard.jobs.forms import PurgeBackupForm, RevertBackupForm
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.views import go_to, invalid_form
from dashboard.runtime import get_runtime
from dashboard.threads import services as thread_services
from deerflow.convert import BackupAlreadyPurgedError, BackupNotFoundError, list_backups, purge_backup

__all__ = ["backup_purge", "backup_revert"]


def _backup(backup_id: str):
    return next((b for b in list_backups(get_runtime().config.database) if b.backup_id == backup_id), None)


def _active_backup(request: HttpRequest, backup_id: str, gone: str, what_now: str):
    """``(backup, None)`` for an active backup, else ``(None, error page)``: 404 when no backup has that id,
    409 ``backup_not_active`` (``gone`` says what its state means, ``what_now`` what to do) when it is
    restored or purged."""
    backup = _backup(backup_id)
    if backup is None:
        return None, error_page(request, ErrorView(404, "backup_not_found", f"No backup {backup_id!r} exists.",
                                                   "Pick a backup from the backups page."))
    if backup.status != "active":
        return None, error_page(request, ErrorView(409, "backup_not_active",
                                                   f"Backup {backup_id} is {backup.status}: {gone}", what_now))
    return backup, None


@require_http_methods(["GET", "POST"])
@staff_required
def backup_revert(request: HttpRequest) -> HttpResponse:
    """The confirmation page (GET, any staff; the button needs the permission) and the revert job
    (POST, the permission of the kind that wrote the backup: :func:`dashboard.jobs.kinds.backup_permissions`)
    for one active backup."""
    form = RevertBackupForm(request.POST if request.method == "POST" else request.GET)
    if request.method == "POST" and not kinds.may_run_jobs(request.user):
        return error_page(request, kinds.refusal())
    if not form.is_valid():
        return invalid_form(request, form)
    backup_id = form.cleaned_data["backup_id"]
    needed = kinds.backup_permissions([backup_id])
    missing = kinds.missing_permission(request.user, needed)
    if request.method == "POST" and missing:
        return error_page(request, kinds.refusal(missing))
    backup, refused = _active_backup(request, backup_id, "its rows are no longer there to restore.",
                                     "Only an active backup can be reverted; see the backups page.")
    if refused:
        return refused
    if request.method == "POST":
        try:
            job = services.create_job(request.user, ConversionJob.Kind.REVERT, {"backup_ids": [backup_id]})
        except JobError as exc:
            return error_page(request, exc.view())
        services.launch(job)
        return redirect(reverse("jobs:detail", args=[job.pk]))
    summary = thread_services.exact_summary_or_none(get_runtime(), backup.thread_id)  # a prune keeps the head
    converted_by = (ThreadResult.objects.filter(backup_id=backup_id, job__kind=ConversionJob.Kind.CONVERT)
                    .select_related("job").first())
    return render(request, "jobs/revert_confirm.html", {
        "backup": backup, "summary": summary, "converted_by": converted_by, "may_revert": missing is None,
        "permission": " and ".join(sorted(needed))})


@require_http_methods(["GET", "POST"])
@staff_required
def backup_purge(request: HttpRequest) -> HttpResponse:
    """The purge confirmation (GET ``?backup_id=``, any staff; the button needs the permission) and the purge
    (POST ``backup_id`` and ``confirm``, the permission of the kind that wrote the backup: purging a prune's
    backup makes the prune irreversible): delete a backup's rows, the thread untouched.

    Answers 400 for a missing ``backup_id`` (or, on POST, an unticked ``confirm``), 404 for an unknown
    backup, 409 for one already purged or restored (GET) / already purged (POST).
    """
    if request.method == "POST":
        if not kinds.may_run_jobs(request.user):
            return error_page(request, kinds.refusal())
        form = PurgeBackupForm(request.POST)
        if not form.is_valid():
            return invalid_form(request, form)
        missing = kinds.missing_permission(request.user, kinds.backup_permissions([form.cleaned_data["backup_id"]]))
        if missing:
            return error_page(request, kinds.refusal(missing))
        try:
            purge_backup(get_runtime().config.database, form.cleaned_data["backup_id"])
        except BackupAlreadyPurgedError as exc:
            return error_page(request, ErrorView(409, "backup_purged", str(exc), "Reload the backups page."))
        except BackupNotFoundError as exc:
            return error_page(request, ErrorView(404, "backup_not_found", str(exc), "Reload the backups page."))
        return go_to(request, reverse("jobs:backups"))
    form = RevertBackupForm(request.GET)
    if not form.is_valid():
        return invalid_form(request, form)
    backup_id = form.cleaned_data["backup_id"]
    backup, refused = _active_backup(request, backup_id, "there are no rows left to purge.", "See the backups page.")
    if refused:
        return refused
    written_by = ThreadResult.objects.filter(backup_id=backup_id).exclude(job__kind=ConversionJob.Kind.REVERT) \
        .select_related("job").first()
    needed = kinds.backup_permissions([backup_id])
    return render(request, "jobs/purge_confirm.html", {
        "backup": backup, "summary": thread_services.exact_summary_or_none(get_runtime(), backup.thread_id),
        "written_by": written_by, "may_purge": kinds.missing_permission(request.user, needed) is None,
        "permission": " and ".join(sorted(needed))})
