"""HTML pages: the thread list and the thread page (htmx fragments for refreshes)."""

from __future__ import annotations

import json

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from dashboard.accounts.auth import staff_required
from dashboard.errors import HANDLED, describe, invalid_parameters
from dashboard.middleware import error_page
from dashboard.runtime import get_runtime
from dashboard.threads import services, storage
from dashboard.threads.forms import (
    HistoryQueryForm,
    StateQueryForm,
    ThreadIdForm,
    ThreadListForm,
)
from dashboard.threads.jsonify import jsonable


def wants_fragment(request: HttpRequest) -> bool:
    """An htmx swap asks for a fragment; htmx's history restore (cache miss) needs the whole page."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def render_error(request: HttpRequest, exc: Exception, **context) -> HttpResponse:
    """The error page (or fragment, for htmx) with the registry's status, detail and hint."""
    return error_page(request, describe(exc), **context)


def _bad_params(request: HttpRequest, form) -> HttpResponse:
    return error_page(request, invalid_parameters(form))


@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
@staff_required
def thread_list(request: HttpRequest) -> HttpResponse:
    """``/threads/``: paginated inventory with mode flags and storage from the thread summary.

    ``POST`` (the "Refresh" button) brings the summary up to date first, then
    answers the same page (htmx) or redirects to it.
    """
    form = ThreadListForm(request.GET)
    if not form.is_valid():
        return _bad_params(request, form)
    filters = form.filters(settings.DASHBOARD_PAGE_SIZE)
    refreshed = None
    try:
        rt = get_runtime()
        if request.method == "POST":
            refreshed = storage.refresh_inventory(rt)
            if not request.htmx:
                return redirect(f"{request.path}?{request.GET.urlencode()}" if request.GET else request.path)
        threads, next_cursor = services.list_threads(rt, **filters)
    except HANDLED as exc:
        return render_error(request, exc)
    query = request.GET.copy()
    query.pop("cursor", None)
    context = {"form": form, "threads": threads, "next_cursor": next_cursor, "query": query.urlencode(),
               "paged": bool(filters["cursor"]), "sort": filters["sort"], "freshness": storage.freshness(rt),
               "refreshed": refreshed}
    template = "threads/_rows.html" if wants_fragment(request) else "threads/list.html"
    return render(request, template, context)


def _channels(values: dict) -> list[tuple[str, str]]:
    return [
        (name, json.dumps(jsonable(value), indent=2, ensure_ascii=False, sort_keys=True))
        for name, value in sorted(values.items())
        if name != "messages"
    ]


@require_GET
@vary_on_headers("HX-Request")
@staff_required
def thread_detail(request: HttpRequest, thread_id: str) -> HttpResponse:
    """``/threads/<thread_id>/``: head (or chosen) checkpoint's messages and channels, plus history."""
    return _thread_detail(request, thread_id)


@require_GET
@vary_on_headers("HX-Request")
@staff_required
def thread_detail_by_query(request: HttpRequest) -> HttpResponse:
    """``/thread/?thread_id=``: the thread page for ids a browser would not keep in a path (``.``, ``..``)."""
    form = ThreadIdForm(request.GET)
    if not form.is_valid():
        return _bad_params(request, form)
    return _thread_detail(request, form.cleaned_data["thread_id"])


def _thread_detail(request: HttpRequest, thread_id: str) -> HttpResponse:
    form = StateQueryForm(request.GET)
    if not form.is_valid():
        return _bad_params(request, form)
    try:
        rt = get_runtime()
    except HANDLED as exc:
        return render_error(request, exc, thread_id=thread_id)
    checkpoint_ns = form.cleaned_data["checkpoint_ns"] or ""
    if request.GET.get("fragment") == "storage":  # loaded after the page: one scan of the thread's rows
        return render(request, "threads/_storage.html", {
            "chart": storage.storage_chart(rt, thread_id, checkpoint_ns), "checkpoint_ns": checkpoint_ns})
    checkpoint_id = form.cleaned_data["checkpoint_id"] or None
    try:
        state = services.read_state(rt, thread_id, checkpoint_id, checkpoint_ns)
        # The head just read validates a summary row already shown for it (no query then).
        summary = services.thread_summary(rt, thread_id, head=None if checkpoint_id else state)
        namespaces = services.thread_namespaces(rt, thread_id)
    except HANDLED as exc:
        return render_error(request, exc, thread_id=thread_id, summary=services.thread_summary_or_none(rt, thread_id))
    return render(request, "threads/detail.html", {
        "thread_id": thread_id,
        "summary": summary,
        "namespaces": namespaces,
        "cadence": services.thread_cadence(rt, thread_id),
        "fleet_snapshot_frequency": rt.snapshot_frequency if rt.mode == "delta" else None,
        "state": state,
        "messages": state.values.get("messages") or [],
        "channels": _channels(state.values),
        "findings": state.findings,
        "flagged_channels": {f["channel"] for f in state.findings},
        "checkpoint_ns": checkpoint_ns,
    })


@require_GET
@staff_required
def thread_history(request: HttpRequest, thread_id: str) -> HttpResponse:
    """The history table fragment (first load and every "older" page)."""
    return _thread_history(request, thread_id)


@require_GET
@staff_required
def thread_history_by_query(request: HttpRequest) -> HttpResponse:
    """``/history/?thread_id=``: the history fragment for ids that cannot be a path (``.``, ``..``)."""
    form = ThreadIdForm(request.GET)
    if not form.is_valid():
        return _bad_params(request, form)
    return _thread_history(request, form.cleaned_data["thread_id"])


def _thread_history(request: HttpRequest, thread_id: str) -> HttpResponse:
    form = HistoryQueryForm(request.GET)
    if not form.is_valid():
        return _bad_params(request, form)
    checkpoint_ns = form.cleaned_data["checkpoint_ns"] or ""
    try:
        rows, next_before = services.read_history(
            get_runtime(), thread_id, limit=form.cleaned_data["limit"] or 25,
            before=form.cleaned_data["before"] or None, checkpoint_ns=checkpoint_ns,
        )
    except HANDLED as exc:
        return render_error(request, exc, thread_id=thread_id)
    return render(request, "threads/_history.html", {
        "thread_id": thread_id, "rows": rows, "next_before": next_before, "checkpoint_ns": checkpoint_ns,
    })
