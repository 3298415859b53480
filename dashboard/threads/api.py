"""JSON API over the thread services (the stable contract in docs/api.md).

``GET /api/threads`` · ``GET /api/threads/<id>/state`` · ``GET /api/threads/<id>/history``.
Errors are ``{"detail", "hint"}`` with the status from :mod:`dashboard.errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from dashboard.accounts.auth import api_staff_required
from dashboard.errors import HANDLED, describe, invalid_parameters, json_error
from dashboard.errors.middleware import not_allowed_view
from dashboard.runtime import get_runtime
from dashboard.threads import services
from dashboard.threads.forms import HistoryQueryForm, StateQueryForm, ThreadListForm


def error_response(exc: Exception) -> JsonResponse:
    """The JSON body and status for a handled domain error."""
    return json_error(describe(exc))


def get_only(view: Callable) -> Callable:
    """Like Django's ``require_GET``: the site's one 405 (:func:`~dashboard.errors.middleware.not_allowed_view`),
    with the thread API's own hint."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method != "GET":
            response = json_error(not_allowed_view(request, ["GET"], hint="The thread API is read-only; use GET."))
            response["Allow"] = "GET"
            return response
        return view(request, *args, **kwargs)

    return wrapper


def _bad_request(form) -> JsonResponse:
    return json_error(invalid_parameters(form))


def _thread_item(t, *, with_storage: bool) -> dict:
    item = {
        "thread_id": t.thread_id,
        "mode": t.mode,
        "mode_evidence": t.mode_evidence,
        "thread_class": t.thread_class,
        "checkpoint_count": t.checkpoint_count,
        "updated_at": t.updated_at.isoformat() if t.updated_at else None,
        "title": t.title,
        "owner": t.owner,
        "deerflow_thread": t.deerflow_thread,
    }
    if with_storage:
        item["bytes"] = {"checkpoints": t.bytes_checkpoints, "blobs": t.bytes_blobs, "writes": t.bytes_writes,
                         "total": t.bytes_total}
        item["replay_depth"] = t.replay_depth
    return item


@get_only
@api_staff_required
def thread_list(request: HttpRequest) -> JsonResponse:
    """``{"threads": [{thread_id, mode, mode_evidence, thread_class, checkpoint_count, updated_at, title, owner,
    deerflow_thread}], "next_cursor"}``.

    ``title`` and ``owner`` are DeerFlow's (``threads_meta``; ``null`` without a row or without the table),
    ``deerflow_thread`` whether DeerFlow has a row (``null``: no ``threads_meta`` table). ``owner=`` filters by
    owner, ``q=`` matches titles as well as ids, ``thread_class=orphaned`` lists orphans.

    With ``sort=`` (``updated``, ``checkpoints`` or ``bytes``) each item also
    carries ``bytes`` (``{checkpoints, blobs, writes, total}``) and ``replay_depth``.
    """
    form = ThreadListForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    try:
        threads, next_cursor = services.list_threads(get_runtime(), **form.filters(settings.DASHBOARD_PAGE_SIZE))
    except HANDLED as exc:
        return error_response(exc)
    with_storage = "sort" in request.GET
    return JsonResponse({
        "threads": [_thread_item(t, with_storage=with_storage) for t in threads],
        "next_cursor": next_cursor,
    })


@get_only
@api_staff_required
def thread_state(request: HttpRequest, thread_id: str) -> JsonResponse:
    """``{thread_id, checkpoint_id, checkpoint_ns, parent_checkpoint_id, created_at, metadata, values, next,
    findings, title, owner, deerflow_thread}`` (``findings``: ``[{kind, channel, detail}]``, e.g.
    ``overwrite_in_blob``; the last three as in :func:`thread_list`)."""
    form = StateQueryForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    try:
        view = services.read_state(
            get_runtime(), thread_id,
            checkpoint_id=form.cleaned_data["checkpoint_id"] or None,
            checkpoint_ns=form.cleaned_data["checkpoint_ns"] or "",
        )
        answer = services.state_answer(get_runtime(), view)
    except HANDLED as exc:
        return error_response(exc)
    return JsonResponse(answer)


@get_only
@api_staff_required
def thread_history(request: HttpRequest, thread_id: str) -> JsonResponse:
    """``{"checkpoints": [{checkpoint_id, parent_checkpoint_id, checkpoint_ns, step, source, created_at, mode,
    messages_stored, message_count}], "next_before"}``."""
    form = HistoryQueryForm(request.GET)
    if not form.is_valid():
        return _bad_request(form)
    try:
        rows, next_before = services.read_history(
            get_runtime(), thread_id,
            limit=form.cleaned_data["limit"] or 50,
            before=form.cleaned_data["before"] or None,
            checkpoint_ns=form.cleaned_data["checkpoint_ns"] or "",
        )
    except HANDLED as exc:
        return error_response(exc)
    return JsonResponse({"checkpoints": [row.__dict__ for row in rows], "next_before": next_before})


@get_only
@api_staff_required
def thread_namespaces(request: HttpRequest, thread_id: str) -> JsonResponse:
    """``{"thread_id", "namespaces": [{checkpoint_ns, path, depth, checkpoint_count, first_checkpoint_id,
    head_checkpoint_id, updated_at}]}``, root first; pass a ``checkpoint_ns`` to ``state`` and ``history``."""
    try:
        found = services.thread_namespaces(get_runtime(), thread_id)
    except HANDLED as exc:
        return error_response(exc)
    return JsonResponse({"thread_id": thread_id, "namespaces": [ns.as_dict() for ns in found]})
