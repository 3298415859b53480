"""HTML pages of conversion jobs: launch, jobs list, job page (live progress), actions, backups list.

Viewing needs staff; every POST also needs the permission of the job's kind
(:mod:`dashboard.jobs.kinds`: ``jobs.manage_conversions``, ``jobs.manage_retention``
for prune jobs and for what undoes them; 403 otherwise) and a CSRF token. Views validate with a form, call one
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
from dashboard.errors import error_page, invalid_parameters
from dashboard.errors.jobs import JobError, NotADryRun
from dashboard.errors.outages import OUTAGES, is_outage
from dashboard.fragments import is_htmx, wants_fragment
from dashboard.jobs import charts, compaction, kinds, services, stalls
from dashboard.jobs.confirm_views import confirm_page
from dashboard.jobs.forms import (
    ConfirmCompactForm,
    ConfirmConvertForm,
    JobActionForm,
    LaunchForm,
)
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.progress import progress
from dashboard.jobs.pruning import REASON_WORDS
from dashboard.jobs.selection import check_threads_exist
from dashboard.jobs.workers import job_runnability, recent_worker_check
from dashboard.runtime import get_runtime
from deerflow.convert import list_backups

RESULTS_SHOWN = 500


def invalid_form(request: HttpRequest, form) -> HttpResponse:
    """The 400 page (or JSON) naming ``form``'s invalid fields."""
    return error_page(request, invalid_parameters(form, what="form", hint="Fix the listed fields and submit again."))


def launch_required(kind: str) -> Callable[[Callable], Callable]:
    """Staff (else login) with the permission the job kind ``kind`` declares (else the 403 page with the hint)."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            missing = kinds.missing_permission(request.user, {kinds.kind_permission(kind)})
            if missing:
                return error_page(request, kinds.refusal(missing))
            return view(request, *args, **kwargs)

        return staff_required(wrapper)

    return decorate


def go_to(request: HttpRequest, url: str) -> HttpResponse:
    """Redirect to ``url``: htmx's client redirect for an htmx request, else a 302."""
    return HttpResponseClientRedirect(url) if is_htmx(request) else redirect(url)


def job_url(job: ConversionJob) -> str:
    """The job's page."""
    return reverse("jobs:detail", args=[job.pk])


@require_GET
@staff_required
def job_list(request: HttpRequest) -> HttpResponse:
    """``/jobs/``: the newest jobs with state and progress."""
    jobs = list(ConversionJob.objects.select_related("created_by")[:100])
    return render(request, "jobs/list.html", {"rows": [(job, progress(job)) for job in jobs]})


def _job_context(job: ConversionJob, user, **extra) -> dict:
    results = list(job.results.all()[:RESULTS_SHOWN])
    derived = list(job.derived_jobs.all()) + list(job.retries.all())
    stalled = stalls.stalled_rows(settings.DASHBOARD_REQUEUE_AFTER_S, job) if job.state == job.State.RUNNING else 0
    return {"job": job, "progress": progress(job), "results": results, "derived": derived, "stalled": stalled,
            "unrunnable": job_runnability(job),
            "requeue_after_s": settings.DASHBOARD_REQUEUE_AFTER_S,
            "more_results": job.results.count() > RESULTS_SHOWN,
            "convertible": [r for r in results if r.status == "needs_conversion"],
            **_compact_offer(job, results), **_prune_offer(job, results),
            "may_act": kinds.missing_permission(user, kinds.job_permissions(job)) is None,
            "kind_spec": kinds.get(job.kind),
            "reclaimable": _reclaimable(job, results),
            "over_limit": _over_limit(job, results), **_revert_offer(job, derived), **_charts(job), **extra}


def _charts(job: ConversionJob) -> dict:
    """``throughput`` (every job; ``None`` before a row finished) and, on a finished dry run, ``growth`` (``None``
    when no row would be rewritten) and ``growth_chart_shown``: :mod:`dashboard.jobs.charts` over all the job's rows."""
    out: dict = {"throughput": charts.throughput_chart(charts.finish_times(job), job.started_at, job.finished_at)}
    spec = kinds.get(job.kind)
    if spec.growth_chart and job.finished:
        statuses = kinds.get(spec.dry_run_of or spec.name).would_write
        rewritten = list(job.results.filter(status__in=statuses).only("thread_id", "bytes_before", "bytes_after"))
        out.update(growth=charts.growth_chart(rewritten), growth_chart_shown=True)
    return out


def _revert_offer(job: ConversionJob, derived: list[ConversionJob]) -> dict:
    """``revertible``: a finished conversion with a backup still active; ``reverted_by``: its revert jobs."""
    if not kinds.get(job.kind).revertible or not job.finished:
        return {}
    try:
        revertible = bool(services.active_backups(job))
    except OUTAGES as exc:  # the checkpoint database is down: offer the button, its POST will say why it fails
        if not is_outage(exc):
            raise
        revertible = True
    return {"revertible": revertible,
            "reverted_by": [d for d in derived if kinds.get(d.kind).permission_from_source]}


def _prune_offer(job: ConversionJob, results) -> dict:
    """A prune job: its rows' lists for the preview, and for a finished dry run the rows it would prune."""
    spec = kinds.get(job.kind)
    if not spec.carries_retention:
        return {}
    rows = [r for r in results if r.status in kinds.get(spec.dry_run_of or spec.name).would_write]
    return {"prune_rows": results, "reason_words": REASON_WORDS,
            "prunable": rows if spec.is_dry_run and job.finished else [],
            "prune_totals": {"deleted": sum(r.checkpoints_rewritten for r in rows),
                             "bytes_before": sum(r.bytes_before for r in rows),
                             "bytes_after": sum(r.bytes_after for r in rows),
                             "bytes_freed": sum(r.bytes_before - r.bytes_after for r in rows)}}


def _compact_offer(job: ConversionJob, results) -> dict:
    """A finished compaction dry run: the threads it would compact, their totals, the full-mode processes."""
    spec = kinds.get(job.kind)
    writer = kinds.get(spec.dry_run_of) if spec.dry_run_of else None
    if writer is None or not writer.needs_delta_fleet or not job.finished:
        return {}
    rows = [r for r in results if r.status in writer.would_write]
    before, after = sum(r.bytes_before for r in rows), sum(r.bytes_after for r in rows)
    return {"compactable": rows, "full_mode_processes": compaction.full_mode_processes(),
            "compact_totals": {"bytes_before": before, "bytes_after": after, "bytes_freed": before - after}}


def _reclaimable(job: ConversionJob, results) -> bool:
    """A finished compaction or prune that wrote a thread: offer "Reclaim disk space…"."""
    spec = kinds.get(job.kind)
    return spec.offers_reclaim and job.finished and any(r.status in spec.written for r in results)


def _over_limit(job: ConversionJob, results) -> bool:
    """A finished dry run whose estimate is above its size limit (the writing kind must then be confirmed)."""
    spec = kinds.get(job.kind)
    if not (spec.size_limited and spec.is_dry_run) or job.size_limit_bytes is None:
        return False
    after = sum(r.bytes_after for r in results if r.status in kinds.get(spec.dry_run_of or spec.name).would_write)
    return after > job.size_limit_bytes


@require_GET
@vary_on_headers("HX-Request")
@staff_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """``/jobs/<id>/``: state, progress bar (htmx polling until finished), results, actions."""
    job = get_object_or_404(ConversionJob, pk=job_id)
    return render(request, "jobs/detail.html", _job_context(job, request.user))


@require_GET
@staff_required
def job_progress(request: HttpRequest, job_id: int) -> HttpResponse:
    """The polled fragment; a finished job answers 286 so htmx stops polling."""
    job = get_object_or_404(ConversionJob, pk=job_id)
    if not wants_fragment(request):  # opened on its own: the job's whole page
        return render(request, "jobs/detail.html", _job_context(job, request.user))
    html = render_to_string("jobs/_job.html", _job_context(job, request.user), request=request)
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
@launch_required(ConversionJob.Kind.DRY_RUN)
def launch(request: HttpRequest) -> HttpResponse:
    """"Convert to full", step 1: a dry run of the chosen threads (the estimate), then its job page."""
    return launch_dry_run(request, ConversionJob.Kind.DRY_RUN)


@require_POST
@launch_required(ConversionJob.Kind.CONVERT)
def confirm_convert(request: HttpRequest, job_id: int) -> HttpResponse:
    """"Convert to full", step 2: convert what the finished dry run ``job_id`` found convertible."""
    return confirm_writing_job(request, job_id, ConversionJob.Kind.CONVERT, ConfirmConvertForm)


@require_POST
@launch_required(ConversionJob.Kind.COMPACT_DRY_RUN)
def compact_launch(request: HttpRequest) -> HttpResponse:
    """"Compact to delta", step 1: a compaction dry run of the chosen threads, then its job page."""
    return launch_dry_run(request, ConversionJob.Kind.COMPACT_DRY_RUN)


@require_POST
@launch_required(ConversionJob.Kind.COMPACT)
def confirm_compact(request: HttpRequest, job_id: int) -> HttpResponse:
    """"Compact to delta", step 2: compact what the finished compaction dry run ``job_id`` found."""
    return confirm_writing_job(request, job_id, ConversionJob.Kind.COMPACT, ConfirmCompactForm)


def launch_dry_run(request: HttpRequest, kind: str, form_class: type = LaunchForm) -> HttpResponse:
    """Step 1 of a writing job: the dry run ``kind`` of the posted selection (``form_class(...).options()``
    gives its :class:`~dashboard.jobs.services.JobOptions`, a prune dry run's rule included), then its job page."""
    form = form_class(request.POST)
    if not form.is_valid():
        return invalid_form(request, form)
    try:
        check_threads_exist(get_runtime(), form.selection().get("thread_ids") or [])  # a clear 400 naming them
        job = services.create_job(request.user, kind, form.selection(), form.options())
    except JobError as exc:
        return error_page(request, exc.view())
    services.launch(job)
    return go_to(request, job_url(job))


def confirm_writing_job(request: HttpRequest, job_id: int, kind: str, form_class: type,
             page: Callable | None = None) -> HttpResponse:
    """Step 2: the job ``kind`` over what the finished dry run ``job_id`` found. Invalid fields (400) and a refused
    job (its status) render the dry run's confirmation page again, with the field errors or the refusal.

    ``page(dry_run, form, error) -> (template, context)`` draws that page (default: the convert and compact
    confirmation, :func:`dashboard.jobs.confirm_views.confirm_page`; the prune views pass their own)."""
    dry_run = get_object_or_404(ConversionJob, pk=job_id)
    form = form_class(request.POST)
    if not form.is_valid():
        if not services.is_finished_dry_run(dry_run, kind):
            return invalid_form(request, form)
        return _confirm_again(request, dry_run, form, None, 400, page)
    try:
        job = services.create_job(request.user, kind, None, form.options(source_job=dry_run))
    except NotADryRun as exc:  # posted to a job that has no estimate form: say so on an error page
        return error_page(request, exc.page_view())
    except JobError as exc:
        return _confirm_again(request, dry_run, form, exc.view(), exc.status, page)
    services.launch(job)
    return go_to(request, job_url(job))


def _confirm_again(request: HttpRequest, dry_run: ConversionJob, form, error, status: int,
                   page: Callable | None = None) -> HttpResponse:
    """The confirmation page of ``dry_run`` once more, with ``form``'s errors or the refusal ``error``."""
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

    Needs the permissions of the job's kind (:func:`dashboard.jobs.kinds.job_permissions`: a revert's are
    those of the jobs whose backups it restores)."""
    if not kinds.may_run_jobs(request.user):  # no job permission at all: refused before any lookup
        return error_page(request, kinds.refusal())
    job = get_object_or_404(ConversionJob, pk=job_id)
    missing = kinds.missing_permission(request.user, kinds.job_permissions(job))
    if missing:
        return error_page(request, kinds.refusal(missing))
    form = JobActionForm(request.POST)
    if not form.is_valid():
        return invalid_form(request, form)
    try:
        target = _ACTIONS[form.cleaned_data["action"]](job, request.user)
    except JobError as exc:
        return error_page(request, exc.view())
    return go_to(request, job_url(target))


@require_GET
@staff_required
def backup_list(request: HttpRequest) -> HttpResponse:
    """``/jobs/backups/``: every backup with its thread, size and status."""
    backups = list_backups(get_runtime().config.database)
    return render(request, "jobs/backups.html", {"backups": backups, "may_run_jobs": kinds.may_run_jobs(request.user)})
