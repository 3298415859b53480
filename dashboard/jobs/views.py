"""HTML pages of conversion jobs: launch, jobs list, job page (live progress), actions, backups list.

Viewing needs staff; every POST also needs ``jobs.manage_conversions``
(``jobs.manage_retention`` for prune jobs and their reverts: deleting is not
converting; 403 otherwise) and a CSRF token. Views validate with a form, call one
function of :mod:`dashboard.jobs.services`, and render or redirect.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from dashboard.accounts.auth import staff_required
from dashboard.errors import ErrorView, invalid_parameters
from dashboard.fragments import is_htmx, wants_fragment
from dashboard.jobs import charts, compaction, reclaiming, services, stalls
from dashboard.jobs.errors import JobError, NotADryRun
from dashboard.jobs.forms import (
    ConfirmCompactForm,
    ConfirmConvertForm,
    JobActionForm,
    LaunchForm,
)
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.progress import progress
from dashboard.jobs.selection import check_threads_exist
from dashboard.jobs.workers import job_runnability, recent_worker_check
from dashboard.middleware import error_page
from dashboard.outages import OUTAGES, is_outage
from dashboard.runtime import get_runtime
from deerflow.convert import list_backups

PERMISSION = "jobs.manage_conversions"
#: Launching, confirming, acting on and reverting prune jobs, and editing retention policies.
RETENTION_PERMISSION = "jobs.manage_retention"
RESULTS_SHOWN = 500
_PRUNE_KINDS = (ConversionJob.Kind.PRUNE_DRY_RUN, ConversionJob.Kind.PRUNE)


def permission_for(kind: str) -> str:
    """The permission a job of ``kind`` needs: :data:`RETENTION_PERMISSION` for prune kinds, else :data:`PERMISSION`."""
    return RETENTION_PERMISSION if kind in _PRUNE_KINDS else PERMISSION


def job_permission(job: ConversionJob) -> str:
    """The permission acting on ``job`` needs; a revert of a prune (its source, or the backups it restores) is
    a prune's business."""
    if job.kind == ConversionJob.Kind.REVERT:
        if job.source_job is not None:
            return permission_for(job.source_job.kind)
        backups = job.results.exclude(backup_id="").values("backup_id")
        pruned = ConversionJob.objects.filter(kind=ConversionJob.Kind.PRUNE, results__backup_id__in=backups)
        return RETENTION_PERMISSION if pruned.exists() else PERMISSION
    return permission_for(job.kind)


def refusal(permission: str) -> ErrorView:
    """The 403 of a user without ``permission``, with the hint of whom to ask."""
    if permission == RETENTION_PERMISSION:
        return ErrorView(403, "permission_denied", "You may view jobs but not prune: pruning deletes checkpoint "
                         "history, which running conversions does not include.",
                         f"Ask an administrator for the permission {RETENTION_PERMISSION} "
                         "(deleting is not converting).")
    return ErrorView(403, "permission_denied", "You may view jobs but not run them.",
                     f"Ask an administrator for the permission {PERMISSION}.")


def _invalid(request: HttpRequest, form) -> HttpResponse:
    return error_page(request, invalid_parameters(form, what="form", hint="Fix the listed fields and submit again."))


def manage_required(view: Callable, permission: str = PERMISSION) -> Callable:
    """Staff (else login) with ``permission`` (default ``jobs.manage_conversions``; else 403 page)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.has_perm(permission):
            return error_page(request, refusal(permission))
        return view(request, *args, **kwargs)

    return staff_required(wrapper)


def retention_required(view: Callable) -> Callable:
    """Staff (else login) with ``jobs.manage_retention`` (else 403 page with the hint)."""
    return manage_required(view, RETENTION_PERMISSION)


def _go(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if is_htmx(request) else redirect(url)


def _job_url(job: ConversionJob) -> str:
    return reverse("jobs:detail", args=[job.pk])


@require_GET
@staff_required
def job_list(request: HttpRequest) -> HttpResponse:
    """``/jobs/``: the newest jobs with state and progress."""
    jobs = list(ConversionJob.objects.select_related("created_by")[:100])
    return render(request, "jobs/list.html", {"rows": [(job, progress(job)) for job in jobs]})


def _job_context(job: ConversionJob, **extra) -> dict:
    results = list(job.results.all()[:RESULTS_SHOWN])
    derived = list(job.derived_jobs.all()) + list(job.retries.all())
    stalled = stalls.stalled_rows(settings.DASHBOARD_REQUEUE_AFTER_S, job) if job.state == job.State.RUNNING else 0
    return {"job": job, "progress": progress(job), "results": results, "derived": derived, "stalled": stalled,
            "unrunnable": job_runnability(job),
            "requeue_after_s": settings.DASHBOARD_REQUEUE_AFTER_S,
            "more_results": job.results.count() > RESULTS_SHOWN,
            "convertible": [r for r in results if r.status == "needs_conversion"],
            **_compact_offer(job, results), **_prune_offer(job, results), "act_permission": job_permission(job),
            "reclaimable": _reclaimable(job, results),
            "over_limit": _over_limit(job, results), **_revert_offer(job, derived), **_charts(job), **extra}


#: A finished dry run of this kind draws the factor of the rows with this status.
_GROWTH_STATUS: dict[str, str] = {ConversionJob.Kind.DRY_RUN: "needs_conversion",
                                   ConversionJob.Kind.COMPACT_DRY_RUN: "needs_compaction"}


def _charts(job: ConversionJob) -> dict:
    """``throughput`` (every job; ``None`` before a row finished) and, on a finished dry run, ``growth`` (``None``
    when no row would be rewritten) and ``growth_chart_shown``: :mod:`dashboard.jobs.charts` over all the job's rows."""
    out: dict = {"throughput": charts.throughput_chart(charts.finish_times(job), job.started_at, job.finished_at)}
    status = _GROWTH_STATUS.get(job.kind)
    if status and job.finished:
        rewritten = list(job.results.filter(status=status).only("thread_id", "bytes_before", "bytes_after"))
        out.update(growth=charts.growth_chart(rewritten), growth_chart_shown=True)
    return out


def _revert_offer(job: ConversionJob, derived: list[ConversionJob]) -> dict:
    """``revertible``: a finished conversion with a backup still active; ``reverted_by``: its revert jobs."""
    if (job.kind not in (ConversionJob.Kind.CONVERT, ConversionJob.Kind.COMPACT, ConversionJob.Kind.PRUNE)
            or not job.finished):
        return {}
    try:
        revertible = bool(services.active_backups(job))
    except OUTAGES as exc:  # the checkpoint database is down: offer the button, its POST will say why it fails
        if not is_outage(exc):
            raise
        revertible = True
    return {"revertible": revertible, "reverted_by": [d for d in derived if d.kind == ConversionJob.Kind.REVERT]}


def _prune_offer(job: ConversionJob, results) -> dict:
    """A prune job: its rows' lists for the preview, and for a finished dry run the rows it would prune."""
    if job.kind not in _PRUNE_KINDS:
        return {}
    from dashboard.jobs.pruning import REASON_WORDS

    rows = [r for r in results if r.status in ("would_prune", "would_delete")]
    return {"prune_rows": results, "reason_words": REASON_WORDS,
            "prunable": rows if job.kind == ConversionJob.Kind.PRUNE_DRY_RUN and job.finished else [],
            "prune_totals": {"deleted": sum(r.checkpoints_rewritten for r in rows),
                             "bytes_before": sum(r.bytes_before for r in rows),
                             "bytes_after": sum(r.bytes_after for r in rows),
                             "bytes_freed": sum(r.bytes_before - r.bytes_after for r in rows)}}


def _compact_offer(job: ConversionJob, results) -> dict:
    """A finished compaction dry run: the threads it would compact, their totals, the full-mode processes."""
    if job.kind != ConversionJob.Kind.COMPACT_DRY_RUN or not job.finished:
        return {}
    rows = [r for r in results if r.status == "needs_compaction"]
    before, after = sum(r.bytes_before for r in rows), sum(r.bytes_after for r in rows)
    return {"compactable": rows, "full_mode_processes": compaction.full_mode_processes(),
            "compact_totals": {"bytes_before": before, "bytes_after": after, "bytes_freed": before - after}}


def _reclaimable(job: ConversionJob, results) -> bool:
    """A finished compaction or prune that wrote a thread: offer "Reclaim disk space…" (issue 11, item 5)."""
    return job.kind in reclaiming.OFFERED_AFTER and job.finished and any(r.status in ("compacted", "pruned", "deleted")
                                                               for r in results)


def _over_limit(job: ConversionJob, results) -> bool:
    after = sum(r.bytes_after for r in results if r.status == "needs_conversion")
    return job.kind == ConversionJob.Kind.DRY_RUN and job.size_limit_bytes is not None and after > job.size_limit_bytes


@require_GET
@vary_on_headers("HX-Request")
@staff_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """``/jobs/<id>/``: state, progress bar (htmx polling until finished), results, actions."""
    job = get_object_or_404(ConversionJob, pk=job_id)
    return render(request, "jobs/detail.html", _job_context(job))


@require_GET
@staff_required
def job_progress(request: HttpRequest, job_id: int) -> HttpResponse:
    """The polled fragment; a finished job answers 286 so htmx stops polling."""
    job = get_object_or_404(ConversionJob, pk=job_id)
    if not wants_fragment(request):  # opened on its own: the job's whole page
        return render(request, "jobs/detail.html", _job_context(job))
    html = render_to_string("jobs/_job.html", _job_context(job), request=request)
    return HttpResponseStopPolling(html) if job.finished else HttpResponse(html)


@require_GET
@staff_required
def worker_status(request: HttpRequest) -> HttpResponse:
    """Fragment: is a delta-mode worker alive to run jobs? (the workers' newest answer, never waited for)"""
    fragment = wants_fragment(request)
    check = recent_worker_check(settings.DASHBOARD_LIVE_CHECK_MAX_AGE_S)
    checked_at = dt.datetime.fromtimestamp(check.checked_at, dt.UTC) if check.checked_at else None
    return render(request, "jobs/_workers.html" if fragment else "jobs/workers.html",
                  {"check": check, "checked_at": checked_at})


@require_POST
@manage_required
def launch(request: HttpRequest) -> HttpResponse:
    """"Convert to full", step 1: a dry run of the chosen threads (the estimate), then its job page."""
    return _launch_dry_run(request, ConversionJob.Kind.DRY_RUN)


@require_POST
@manage_required
def confirm_convert(request: HttpRequest, job_id: int) -> HttpResponse:
    """"Convert to full", step 2: convert what the finished dry run ``job_id`` found convertible."""
    return _confirm(request, job_id, ConversionJob.Kind.CONVERT, ConfirmConvertForm)


@require_POST
@manage_required
def compact_launch(request: HttpRequest) -> HttpResponse:
    """"Compact to delta", step 1: a compaction dry run of the chosen threads, then its job page."""
    return _launch_dry_run(request, ConversionJob.Kind.COMPACT_DRY_RUN)


@require_POST
@manage_required
def confirm_compact(request: HttpRequest, job_id: int) -> HttpResponse:
    """"Compact to delta", step 2: compact what the finished compaction dry run ``job_id`` found."""
    return _confirm(request, job_id, ConversionJob.Kind.COMPACT, ConfirmCompactForm)


def _launch_dry_run(request: HttpRequest, kind: str, form_class: type = LaunchForm) -> HttpResponse:
    """Step 1 of a writing job: the dry run ``kind`` of the posted selection, then its job page
    (a form with a ``retention()`` method gives a prune dry run its rule)."""
    form = form_class(request.POST)
    if not form.is_valid():
        return _invalid(request, form)
    try:
        extra = {"retention": form.retention()} if hasattr(form, "retention") else {}
        check_threads_exist(get_runtime(), form.selection().get("thread_ids") or [])  # a clear 400 naming them
        job = services.create_job(request.user, kind, form.selection(),
                                  integrity=not form.cleaned_data["skip_integrity"],
                                  acknowledge_branch_ambiguous=form.cleaned_data["acknowledge_branch_ambiguous"],
                                  **extra)
    except JobError as exc:
        return error_page(request, exc.view())
    services.launch(job)
    return _go(request, _job_url(job))


def _confirm(request: HttpRequest, job_id: int, kind: str, form_class: type,
             page: Callable | None = None) -> HttpResponse:
    """Step 2: the job ``kind`` over what the finished dry run ``job_id`` found. Invalid fields (400) and a refused
    job (its status) render the dry run's confirmation page again, with the field errors or the refusal.

    ``page(dry_run, form, error) -> (template, context)`` draws that page (default: the convert and compact
    confirmation, :func:`dashboard.jobs.confirm_views.confirm_page`; the prune views pass their own)."""
    dry_run = get_object_or_404(ConversionJob, pk=job_id)
    form = form_class(request.POST)
    if not form.is_valid():
        if not services.is_finished_dry_run(dry_run, kind):
            return _invalid(request, form)
        return _confirm_again(request, dry_run, form, None, 400, page)
    try:
        job = services.create_job(request.user, kind, source_job=dry_run, **form.options())
    except NotADryRun as exc:  # posted to a job that has no estimate form: say so on an error page
        return error_page(request, exc.page_view())
    except JobError as exc:
        return _confirm_again(request, dry_run, form, exc.view(), exc.status, page)
    services.launch(job)
    return _go(request, _job_url(job))


def _confirm_again(request: HttpRequest, dry_run: ConversionJob, form, error, status: int,
                   page: Callable | None = None) -> HttpResponse:
    """The confirmation page of ``dry_run`` once more, with ``form``'s errors or the refusal ``error``."""
    from dashboard.jobs.confirm_views import confirm_page

    template, context = (page or confirm_page)(dry_run, form, error)
    return render(request, template, context, status=status)


_ACTIONS = {
    "pause": lambda job, user: services.pause(job),
    "resume": lambda job, user: services.resume(job),
    "cancel": lambda job, user: services.cancel(job),
    "retry": services.retry,
    "revert": services.revert,
}


@require_POST
@staff_required
def job_action(request: HttpRequest, job_id: int) -> HttpResponse:
    """Pause, resume, cancel (this job) or retry, revert (a new job); then the resulting job's page.

    Needs :func:`job_permission` of the job (``jobs.manage_retention`` for prune jobs and their reverts)."""
    if not (request.user.has_perm(PERMISSION) or request.user.has_perm(RETENTION_PERMISSION)):
        return error_page(request, refusal(PERMISSION))  # no job permission at all: refused before any lookup
    job = get_object_or_404(ConversionJob, pk=job_id)
    needed = job_permission(job)
    if not request.user.has_perm(needed):
        return error_page(request, refusal(needed))
    form = JobActionForm(request.POST)
    if not form.is_valid():
        return _invalid(request, form)
    try:
        target = _ACTIONS[form.cleaned_data["action"]](job, request.user)
    except JobError as exc:
        return error_page(request, exc.view())
    return _go(request, _job_url(target))


@require_GET
@staff_required
def backup_list(request: HttpRequest) -> HttpResponse:
    """``/jobs/backups/``: every backup with its thread, size and status."""
    backups = list_backups(get_runtime().config.database)
    return render(request, "jobs/backups.html", {"backups": backups})
