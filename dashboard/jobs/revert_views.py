"""``/jobs/backups/revert``: revert one thread from one backup, after a confirmation page.

``GET ?backup_id=`` is the confirmation (the thread, the backup's rows and
bytes against the thread's current size, what the revert replaces and what it
keeps); ``POST`` starts a revert job for that backup and redirects to the job
(so no POST URL stays in the address bar).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from dashboard.accounts.auth import staff_required
from dashboard.errors import HANDLED, ErrorView
from dashboard.jobs import services
from dashboard.jobs.errors import JobError
from dashboard.jobs.forms import RevertBackupForm
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.pruning import is_prune_backup
from dashboard.jobs.views import PERMISSION, RETENTION_PERMISSION, _invalid, refusal
from dashboard.middleware import error_page
from dashboard.runtime import get_runtime
from dashboard.threads import services as thread_services
from deerflow.convert import list_backups

__all__ = ["backup_revert"]


def _backup(backup_id: str):
    return next((b for b in list_backups(get_runtime().config.database) if b.backup_id == backup_id), None)


@require_http_methods(["GET", "POST"])
@staff_required
def backup_revert(request: HttpRequest) -> HttpResponse:
    """The confirmation page (GET, any staff; the button needs the permission) and the revert job
    (POST, ``jobs.manage_conversions``; ``jobs.manage_retention`` for a prune's backup) for one active backup."""
    form = RevertBackupForm(request.POST if request.method == "POST" else request.GET)
    if request.method == "POST" and not (request.user.has_perm(PERMISSION) or request.user.has_perm(RETENTION_PERMISSION)):
        return error_page(request, ErrorView(403, "permission_denied", "You may view backups but not revert them.",
                                             f"Ask an administrator for the permission {PERMISSION}."))
    if not form.is_valid():
        return _invalid(request, form)
    backup_id = form.cleaned_data["backup_id"]
    needed = RETENTION_PERMISSION if is_prune_backup(backup_id) else PERMISSION
    if request.method == "POST" and not request.user.has_perm(needed):
        return error_page(request, refusal(needed))
    backup = _backup(backup_id)
    if backup is None:
        return error_page(request, ErrorView(404, "backup_not_found", f"No backup {backup_id!r} exists.",
                                             "Pick a backup from the backups page."))
    if backup.status != "active":
        return error_page(request, ErrorView(409, "backup_not_active", f"Backup {backup_id} is {backup.status}: "
                                             "its rows are no longer there to restore.",
                                             "Only an active backup can be reverted; see the backups page."))
    if request.method == "POST":
        try:
            job = services.create_job(request.user, ConversionJob.Kind.REVERT, {"backup_ids": [backup_id]})
        except JobError as exc:
            return error_page(request, exc.view())
        services.launch(job)
        return redirect(reverse("jobs:detail", args=[job.pk]))
    try:
        summary = thread_services.thread_summary(get_runtime(), backup.thread_id)
    except HANDLED:
        summary = None
    converted_by = (ThreadResult.objects.filter(backup_id=backup_id, job__kind=ConversionJob.Kind.CONVERT)
                    .select_related("job").first())
    return render(request, "jobs/revert_confirm.html", {"backup": backup, "summary": summary,
                                                        "converted_by": converted_by})
