"""JSON API of conversion jobs.

``GET /api/jobs`` · ``GET /api/jobs/<id>`` · ``POST /api/jobs``.
Staff session or ``Authorization: Bearer <token>``; ``POST`` also needs the
permission of the job's kind (:mod:`dashboard.jobs.kinds`: ``jobs.manage_conversions``,
``jobs.manage_retention`` for the prune kinds and for reverts of prunes) and,
with a session, a CSRF token.
Errors are ``{"detail", "hint", "code"}``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET, require_http_methods

from dashboard.accounts.auth import api_staff_required, scope_refusal
from dashboard.errors import ErrorView, invalid_parameters, json_error
from dashboard.errors.jobs import EstimateJobNotFound, JobError, SourceJobNotFound
from dashboard.jobs import kinds, pruning, reclaiming, services
from dashboard.jobs.forms import ApiJobForm, JobResultsPageForm
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.progress import progress
from dashboard.jobs.schemas import check_job_body
from dashboard.jobs.selection import check_request_bounds, check_threads_exist
from dashboard.jsonbody import BodyRefused, json_body
from dashboard.runtime import get_runtime

_RESULT_FIELDS = ("thread_id", "status", "checkpoints_total", "checkpoints_rewritten", "bytes_before", "bytes_after",
                  "head_messages_sha256", "first_difference", "findings", "error", "hint", "error_code",
                  "backup_id", "worker_host", "worker_node", "worker_pid", "worker_mode",
                  "worker_snapshot_frequency", "attempts", "duration_s")
#: Per-thread lists of a prune job's row (``ThreadResult.prune``), answered at the row's top level.
_PRUNE_FIELDS = ("kept_checkpoint_ids", "deleted_checkpoint_ids", "protected_checkpoint_ids", "protected",
                 "rebased_checkpoint_ids", "unbranchable_checkpoint_ids", "deleted_namespaces")


#: What a job body holds (said with every 400 of ``POST /api/jobs``).
JOB_BODY_HINT = ("Send a JSON object: kind (dry_run, convert, revert, compact_dry_run, compact, prune_dry_run, "
                 "prune or reclaim); one of thread_ids, filter or backup_ids; optionally estimate_job, confirmed, "
                 "throttle_delay_s, max_in_flight, integrity, force_full_fleet, acknowledge_branch_ambiguous; "
                 "for prune kinds rule, keep_last, protect, backup, max_delete_per_run; for reclaim only confirm "
                 "(true), full, source_job (docs/api.md; docs/operations.md, Conversion jobs; docs/retention.md).")


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def job_json(job: ConversionJob) -> dict[str, Any]:
    """A job's fields and progress (no results)."""
    return {
        "id": job.pk, "kind": job.kind, "state": job.state, "selection": job.selection, "estimate": job.estimate,
        "launched_by": job.launched_by, "runner": job.runner, "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at), "finished_at": _iso(job.finished_at),
        "throttle_delay_s": job.throttle_delay_s, "max_in_flight": job.max_in_flight, "confirmed": job.confirmed,
        "size_limit_bytes": job.size_limit_bytes, "integrity": job.integrity,
        "acknowledge_branch_ambiguous": job.acknowledge_branch_ambiguous,
        "source_job": job.source_job_id, "parent": job.parent_id, "progress": progress(job).as_dict(),
        "retention": job.retention or None, "reclaim": job.reclaim or None,
        "delete_cap": pruning.cap_report(job),
    }


def result_json(result: ThreadResult) -> dict[str, Any]:
    """One thread's outcome, with the worker that ran it."""
    out = {name: getattr(result, name) for name in _RESULT_FIELDS}
    out.update(started_at=_iso(result.started_at), finished_at=_iso(result.finished_at), deerflow=result.deerflow)
    if kinds.get(result.job.kind).carries_retention or result.prune:
        out.update({name: result.prune.get(name, []) for name in _PRUNE_FIELDS})
        out["checkpoints_deleted"] = result.checkpoints_rewritten
    return out


@require_http_methods(["GET", "POST"])
@api_staff_required
def jobs(request: HttpRequest) -> HttpResponse:
    """``GET``: ``{"jobs": [job...]}`` (newest 100). ``POST``: create and launch a job; 201 with the job."""
    if request.method == "GET":
        return JsonResponse({"jobs": [job_json(j) for j in ConversionJob.objects.all()[:100]]})
    return _create(request)


def _create(request: HttpRequest) -> HttpResponse:
    # CSRF: Django's CsrfViewMiddleware checked a session POST before this view (dashboard.middleware).
    refused = scope_refusal(request, "manage")
    if refused is not None:
        return refused
    if not kinds.may_run_jobs(request.user):
        return json_error(ErrorView(403, "permission_denied", "Staff access does not include running jobs.",
                                    f"Ask an administrator for the permission {kinds.MANAGE_CONVERSIONS} "
                                    f"(conversions) or {kinds.MANAGE_RETENTION} (pruning)."))
    try:
        body = json_body(request, hint=JOB_BODY_HINT)
    except BodyRefused as exc:
        return json_error(exc.view)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return json_error(ErrorView(400, "invalid_json", "Invalid job: the body is not a JSON object",
                                    JOB_BODY_HINT))
    try:
        check_job_body(body, hint=JOB_BODY_HINT)
    except BodyRefused as exc:
        return json_error(exc.view)
    try:
        missing = kinds.missing_permission(request.user, _permissions(body))
        if missing:
            return json_error(kinds.refusal(missing))
        form = ApiJobForm(body)
        if not form.is_valid():
            return json_error(invalid_parameters(form, what="job", hint=JOB_BODY_HINT))
        job = _create_job(request, form)
    except JobError as exc:
        return json_error(exc.view())
    services.launch(job)
    return JsonResponse(job_json(job), status=201)


def _permissions(body: dict[str, Any]) -> frozenset[str]:
    """What launching ``body``'s job needs, decided before the body is validated (a refusal says nothing about
    the rest): the kind's permission, a revert's from the job it undoes or the backups it restores.

    An ``estimate_job`` naming no job needs the kind's own permission here; the request then answers 404.
    """
    kind = body.get("kind")
    kind = kind if isinstance(kind, str) else ""
    if kind == ConversionJob.Kind.PRUNE and body.get("dry_run") is True:
        kind = ConversionJob.Kind.PRUNE_DRY_RUN
    source = body.get("estimate_job")
    job = None
    if isinstance(source, int) and not isinstance(source, bool) and 0 < source < 2**63:
        job = ConversionJob.objects.filter(pk=source).first()
    return kinds.launch_permissions(kind, job, body)


def _source_job(job_id: int | None) -> ConversionJob | None:
    """The job ``estimate_job`` names.

    Raises:
        EstimateJobNotFound: no job has that id.
    """
    if not job_id:
        return None
    found = ConversionJob.objects.filter(pk=job_id).first()
    if found is None:
        raise EstimateJobNotFound(f"No job {job_id}.")
    return found


def _create_job(request: HttpRequest, form: ApiJobForm) -> ConversionJob:
    """The job ``form`` asks for (``kind: reclaim``: the database's vacuum, confirmed by ``confirm``)."""
    data = form.cleaned_data
    if kinds.get(data["kind"]).selects == kinds.Selects.DATABASE:
        followed = ConversionJob.objects.filter(pk=data["source_job"]).first() if data["source_job"] else None
        if data["source_job"] and followed is None:
            raise SourceJobNotFound(f"No job {data['source_job']}.")
        return reclaiming.create_reclaim_job(request.user, full=bool(data["full"]), source_job=followed)
    source = _source_job(data["estimate_job"])
    check_request_bounds(form.selection())
    check_threads_exist(get_runtime(), (form.selection() or {}).get("thread_ids") or [])
    return services.create_job(request.user, data["kind"], form.selection(), form.options(source))


@require_GET
@api_staff_required
def job(request: HttpRequest, job_id: int) -> JsonResponse:
    """``{...job, "progress", "results": [...], "results_total", "results_next_offset"}``.

    ``results`` is one page (``?results_offset=&results_limit=``, 500 by default,
    at most 1000) in thread order; ``results_next_offset`` is the offset of the
    next page, ``null`` on the last.
    """
    form = JobResultsPageForm(request.GET)
    if not form.is_valid():
        return json_error(invalid_parameters(form, hint="results_offset >= 0; 1 <= results_limit <= 1000."))
    found = ConversionJob.objects.filter(pk=job_id).first()
    if found is None:
        return json_error(ErrorView(404, "job_not_found", f"No job {job_id}.", "GET /api/jobs lists the jobs."))
    offset, limit = form.page()
    total = found.results.count()
    page = found.results.order_by("pk")[offset:offset + limit]
    following = offset + limit if offset + limit < total else None
    return JsonResponse({**job_json(found), "results": [result_json(r) for r in page], "results_total": total,
                         "results_next_offset": following})
