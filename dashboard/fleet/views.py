"""The /audit/ page (one template; the body fragment is what htmx refreshes) and its writes, each needing
``fleet.dismiss_process`` and recorded in the audit log: dismissing a gone or restarted process
(``POST /audit/dismiss``) and clearing the stopped ones (``POST /audit/clear-stopped``)."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard.accounts.auth import staff_required
from dashboard.errors import ErrorView, error_page, invalid_parameters
from dashboard.fleet import charts
from dashboard.fleet.audit import run_audit
from dashboard.fleet.control import recent_live_check
from dashboard.fleet.forms import DismissProcessForm
from dashboard.fleet.models import ProcessRecord
from dashboard.fleet.processes import NotDismissible, clear_stopped, dismiss
from dashboard.fragments import wants_fragment
from dashboard.runtime import get_runtime
from dashboard.threads.templatetags.thread_tags import class_words

#: The permission ``POST /audit/dismiss`` needs.
DISMISS_PERMISSION = "fleet.dismiss_process"


@require_GET
@staff_required
def audit_page(request: HttpRequest) -> HttpResponse:
    """``/audit/``: processes, findings, census, cadences, writers and readiness.

    The live check is the newest one this process made (:func:`dashboard.fleet.control.recent_live_check`,
    at most ``DASHBOARD_LIVE_CHECK_MAX_AGE_S`` old before a background refresh), so a refresh does not wait
    the broadcast's 1 s; the page says when it was made. ``GET /api/audit`` and ``/metrics`` read it too;
    ``audit_modes`` checks anew.
    """
    live = recent_live_check(settings.DASHBOARD_LIVE_CHECK_MAX_AGE_S)
    audit = run_audit(get_runtime(), live=live)
    fragment = wants_fragment(request)  # a restore needs the whole page
    template = "fleet/_audit_body.html" if fragment else "fleet/audit.html"
    words = {cls: class_words(cls) for cls in audit.census}
    checked_at = dt.datetime.fromtimestamp(live.checked_at, dt.UTC) if live.checked_at else None
    stopped = sum(1 for p in audit.processes if p["state"] == "stopped")
    return render(request, template, {"audit": audit, "live_checked_at": checked_at, "stopped": stopped,
                                      "census_chart": charts.census_chart(audit.census, words),
                                      "storage_chart": charts.storage_chart(audit.storage) if audit.storage else None})


def _refused(request: HttpRequest, what: str) -> HttpResponse | None:
    """The 403 page when the user may not ``what`` (lacks ``fleet.dismiss_process``), else ``None``."""
    if request.user.has_perm(DISMISS_PERMISSION):
        return None
    return error_page(request, ErrorView(403, "permission_denied", f"You may read the audit but not {what}.",
                                         f"Ask an administrator for the permission {DISMISS_PERMISSION}."))


@require_POST
@staff_required
def dismiss_process(request: HttpRequest) -> HttpResponse:
    """Dismiss one restarted or gone process, then back to ``/audit/`` (303-style redirect, no POST URL left).

    Answers 403 without ``fleet.dismiss_process``, 400 without ``instance_id``, 404 for an unknown one,
    409 for a live or stopped process.
    """
    if refused := _refused(request, "dismiss processes"):
        return refused
    form = DismissProcessForm(request.POST)
    if not form.is_valid():
        return error_page(request, invalid_parameters(form, what="form",
                                                      hint="Use the Dismiss button of the audit page."))
    try:
        dismiss(form.cleaned_data["instance_id"], request.user.get_username())
    except ProcessRecord.DoesNotExist as exc:
        return error_page(request, ErrorView(404, "process_not_found", str(exc), "Reload the audit page."))
    except NotDismissible as exc:
        return error_page(request, ErrorView(409, "process_not_dismissible", str(exc),
                                             "A live process leaves the list by itself when it stops; "
                                             "reload the audit page."))
    return redirect(reverse("audit"))


@require_POST
@staff_required
def clear_stopped_processes(request: HttpRequest) -> HttpResponse:
    """Take every cleanly stopped process off the audit's list (:func:`dashboard.fleet.processes.clear_stopped`),
    then back to ``/audit/``. Stopped processes leave by themselves 24 hours after their stop
    (:data:`~dashboard.fleet.processes.STOPPED_RETENTION`); this is for sooner.

    Answers 403 without ``fleet.dismiss_process``; with nothing stopped it changes nothing and redirects too.
    """
    if refused := _refused(request, "clear stopped processes"):
        return refused
    clear_stopped(request.user.get_username())
    return redirect(reverse("audit"))
