"""HTML pages: the thread list and the thread page (htmx fragments for refreshes)."""

from __future__ import annotations

import json
import re

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from dashboard.accounts.auth import staff_required
from dashboard.errors import HANDLED, ErrorView, describe, error_page, invalid_parameters
from dashboard.formatting import plural
from dashboard.fragments import is_htmx, wants_fragment
from dashboard.runtime import get_runtime
from dashboard.threads import extensions, fragments, services, storage
from dashboard.threads.diff import diff_values
from dashboard.threads.forms import (
    HistoryPageForm,
    StateQueryForm,
    ThreadIdForm,
    ThreadListForm,
    ThreadPageForm,
)
from dashboard.threads.jsonify import jsonable
from dashboard.threads.messages import message_item, message_page, message_text
from dashboard.threads.tree import draw_tree, parse_lanes
from dashboard.threads.writes import pending_writes


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
            if not is_htmx(request):
                return redirect(f"{request.path}?{request.GET.urlencode()}" if request.GET else request.path)
        threads, next_cursor = services.list_threads(rt, **filters)
        total = services.count_threads(rt, **filters)
        deerflow_tables = services.deerflow_tables_present(rt)
    except HANDLED as exc:
        return render_error(request, exc)
    query = request.GET.copy()
    query.pop("cursor", None)
    context = {"form": form, "threads": threads, "next_cursor": next_cursor, "query": query.urlencode(),
               "paged": bool(filters["cursor"]), "sort": filters["sort"], "freshness": storage.freshness(rt),
               "refreshed": refreshed, "total": total, "deerflow_tables": deerflow_tables,
               "orphan_min_idle": services.seconds_words(settings.DASHBOARD_ORPHAN_MIN_IDLE_S)}
    template = "threads/_rows.html" if wants_fragment(request) else "threads/list.html"
    return render(request, template, context)


#: Characters of a channel's JSON shown on the thread page (the raw JSON view has the rest).
CHANNEL_CHARS = 4000


def _channels(values: dict) -> list[tuple[str, str, int]]:
    """``(name, JSON text cut at CHANNEL_CHARS, characters cut)`` for every channel but ``messages``."""
    out = []
    for name, value in sorted(values.items()):
        if name == "messages":
            continue
        text = json.dumps(jsonable(value), indent=2, ensure_ascii=False, sort_keys=True)
        out.append((name, text[:CHANNEL_CHARS], max(0, len(text) - CHANNEL_CHARS)))
    return out


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
        return render(request, "threads/_storage.html" if wants_fragment(request) else "threads/storage.html", {
            "chart": storage.storage_chart(rt, thread_id, checkpoint_ns), "checkpoint_ns": checkpoint_ns,
            "thread_id": thread_id})
    page_form = ThreadPageForm(request.GET)
    if not page_form.is_valid():
        return _bad_params(request, page_form)
    opts = page_form.cleaned_data
    checkpoint_id = form.cleaned_data["checkpoint_id"] or None
    try:
        thread_reader = services.reader(rt)  # one per request, for every read below
        state = services.read_state(rt, thread_id, checkpoint_id, checkpoint_ns, thread_reader=thread_reader)
        if opts["view"] == "json":
            return _state_json(state, services.state_answer(rt, state), download=opts["download"])
        if opts["view"] == "message":
            return _one_message(request, state, opts["index"], download=opts["download"])
        if opts["view"] == "diff":
            base = services.read_state(rt, thread_id, opts["base"], checkpoint_ns, thread_reader=thread_reader)
            return render(request, "threads/diff.html", {
                "thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "base": base, "state": state,
                "diff": diff_values(base.values, state.values)})
        messages = message_page(state.values.get("messages") or [], page=opts["page"] or 1, q=opts["q"],
                                role=opts["role"])
        if wants_fragment(request, target="messages-section"):
            return render(request, "threads/_messages.html", {
                "thread_id": thread_id, "state": state, "checkpoint_ns": checkpoint_ns, "mpage": messages,
                "page_form": page_form})
        # The head just read validates a summary row already shown for it (no query then).
        summary = services.thread_summary(rt, thread_id, head=None if checkpoint_id else state)
        namespaces = services.page_namespaces(rt, thread_id, thread_reader=thread_reader)
        writes = pending_writes(rt, thread_id, state.checkpoint_id, checkpoint_ns, stored=state.pending_writes)
        jobs = extensions.current().thread_jobs(thread_id)
        deerflow = services.deerflow_facts(rt, thread_id)
    except HANDLED as exc:
        return render_error(request, exc, thread_id=thread_id, summary=services.thread_summary_or_none(rt, thread_id))
    return render(request, "threads/detail.html", {
        "thread_id": thread_id,
        "summary": summary,
        "namespaces": namespaces,
        "cadence": storage.summary_cache.cadence(
            rt, summary, lambda: services.thread_cadence(rt, thread_id, summary=summary)),
        "fleet_snapshot_frequency": rt.snapshot_frequency if rt.mode == "delta" else None,
        "state": state,
        "mpage": messages,
        "page_form": page_form,
        "channels": _channels(state.values),
        "findings": state.findings,
        "flagged_channels": {f["channel"] for f in state.findings},
        "checkpoint_ns": checkpoint_ns,
        "writes": writes,
        "provenance": jobs,
        "prune_job": opts["prune_job"],
        "deerflow": deerflow,
    })


def _download_name(state, suffix: str) -> str:
    """A file name from the thread and checkpoint ids (anything but ``[A-Za-z0-9._-]`` becomes ``_``)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{state.thread_id}-{state.checkpoint_id}")[:180]
    return f"{stem}{suffix}"


def _state_json(state, answer: dict, *, download: bool) -> HttpResponse:
    """The checkpoint's materialized state as the API's JSON ``answer`` (``download``: as an attachment)."""
    body = json.dumps(answer, indent=2, ensure_ascii=False, sort_keys=True)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    if download:
        response["Content-Disposition"] = f'attachment; filename="{_download_name(state, ".json")}"'
    return response


def _one_message(request: HttpRequest, state, index: int, *, download: bool) -> HttpResponse:
    """One message whole: its page (escaped), or its text as a download."""
    messages = state.values.get("messages") or []
    if index >= len(messages):
        return error_page(request, ErrorView(
            404, "message_not_found",
            f"Checkpoint {state.checkpoint_id} holds {plural(messages, 'message')}; there is no message {index}.",
            "Open the thread page and pick a message from the list (positions start at 0)."),
            thread_id=state.thread_id)
    if download:
        response = HttpResponse(message_text(messages[index]), content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{_download_name(state, f"-message-{index}.txt")}"'
        return response
    return render(request, "threads/message.html", {
        "thread_id": state.thread_id, "state": state, "checkpoint_ns": state.checkpoint_ns,
        "item": message_item(index, messages[index]), "text": message_text(messages[index])})


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
    form = HistoryPageForm(request.GET)
    if not form.is_valid():
        return _bad_params(request, form)
    checkpoint_ns = form.cleaned_data["checkpoint_ns"] or ""
    before = form.cleaned_data["before"] or None
    try:
        rows, next_before = services.read_history(
            get_runtime(), thread_id, limit=form.cleaned_data["limit"] or 25,
            before=before, checkpoint_ns=checkpoint_ns,
        )
    except HANDLED as exc:
        return render_error(request, exc, thread_id=thread_id)
    tree, lanes_after = draw_tree(rows, parse_lanes(form.cleaned_data["lanes"]), first_page=before is None)
    template = "threads/_history.html" if wants_fragment(request) else "threads/history.html"
    prune_job = form.cleaned_data["prune_job"]
    history_key = None if prune_job else fragments.history_rows_key(
        get_runtime().config.database, thread_id, checkpoint_ns, tree, lanes_after, next_before)
    return render(request, template, {
        "history_key": history_key,
        "thread_id": thread_id, "rows": rows, "tree": tree, "lanes_after": lanes_after,
        "next_before": next_before, "checkpoint_ns": checkpoint_ns, "prune_job": prune_job,
        "prune": extensions.current().checkpoint_marks(prune_job, thread_id) if prune_job else None,
    })
