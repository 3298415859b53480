""""Reclaim disk space…": the confirmation page and the reclaim job.

``GET /jobs/reclaim[?source_job=<id>]`` is the confirmation: the statement
it runs (SQLite ``VACUUM``; Postgres ``VACUUM (ANALYZE)`` of LangGraph's
tables, ``VACUUM (FULL, ANALYZE)`` only when ticked), what it locks and for how
long, the disk it needs, the sizes now, and the job's backups still holding
the space. ``POST /jobs/reclaim`` (``confirm`` ticked) starts a ``reclaim``
job and redirects to its page, which records the sizes before and after.
Any staff may read the page; the button needs the ``reclaim`` kind's
permission (:mod:`dashboard.jobs.kinds`: ``jobs.manage_conversions``, as compaction).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_http_methods

from dashboard.accounts.auth import staff_required
from dashboard.errors import ErrorView, error_page
from dashboard.errors.jobs import JobError
from dashboard.errors.outages import OUTAGES, is_outage
from dashboard.jobs import kinds, reclaiming, services
from dashboard.jobs.forms import ReclaimForm
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.views import go_to, invalid_form, job_url
from dashboard.runtime import get_runtime

__all__ = ["reclaim"]


def _source(source_id: int | None) -> ConversionJob | None:
    return get_object_or_404(ConversionJob, pk=source_id) if source_id else None


@require_http_methods(["GET", "POST"])
@staff_required
def reclaim(request: HttpRequest) -> HttpResponse:
    """The reclaim confirmation (GET) and the reclaim job (POST, ``jobs.manage_conversions``).

    Answers 400 for bad fields or an unticked ``confirm`` (the page again, with the error), 403 without
    the permission, 404 for an unknown ``source_job``, 400 for ``full`` on SQLite, 503 when the checkpoint
    database cannot be read.
    """
    missing = kinds.missing_permission(request.user, {kinds.kind_permission(ConversionJob.Kind.RECLAIM)})
    if request.method == "POST" and missing:
        return error_page(request, kinds.refusal(missing))
    form = ReclaimForm(request.POST if request.method == "POST" else request.GET)
    if not form.is_valid():
        return invalid_form(request, form)
    source = _source(form.cleaned_data["source_job"])
    full = form.cleaned_data["full"]
    if request.method == "POST" and form.cleaned_data["confirm"]:
        try:
            job = reclaiming.create_reclaim_job(request.user, full=full, source_job=source)
        except JobError as exc:
            return error_page(request, exc.view())
        services.launch(job)
        return go_to(request, job_url(job))
    try:
        backups = len(services.active_backups(source)) if source is not None else 0
        plan = reclaiming.plan(get_runtime(), full=full, active_backups=backups)
    except OUTAGES as exc:
        if not is_outage(exc):
            raise
        return error_page(request, ErrorView(503, "checkpoint_database_unavailable",
                                             f"The checkpoint database cannot be read: {exc}",
                                             "Retry when it is back; nothing was written."))
    except (ValueError, FileNotFoundError) as exc:
        return error_page(request, ErrorView(409, "nothing_to_reclaim", str(exc),
                                             "Reclaim needs the SQLite file or the Postgres database DeerFlow writes."))
    unconfirmed = request.method == "POST"  # posted without ticking the box
    return render(request, "jobs/reclaim_confirm.html", {
        "plan": plan, "source": source, "form": form, "full": full, "unconfirmed": unconfirmed,
        "may_reclaim": missing is None}, status=400 if unconfirmed else 200)
