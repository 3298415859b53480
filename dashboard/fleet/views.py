"""The /audit/ page (one template; the body fragment is what htmx refreshes) and its one write: dismissing
a gone or restarted process (``POST /audit/dismiss``, ``fleet.dismiss_process``; recorded in the audit log)."""

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
from dashboard.fleet.processes import NotDismissible, dismiss
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
    return render(request, template, {"audit": audit, "live_checked_at": checked_at,
                                      "census_chart": charts.census_chart(audit.census, words),
                                      "storage_chart": charts.storage_chart(audit.storage) if audit.storage else None})


@require_POST
@staff_required
def dismiss_process(request: HttpRequest) -> HttpResponse:
    """Dismiss one restarted or gone process, then back to ``/audit/`` (303-style redirect, no POST URL left).

    Answers 403 without ``fleet.dismiss_process``, 400 without ``instance_id``, 404 for an unknown one,
    409 for a live or stopped process.
    """
    if not request.user.has_perm(DISMISS_PERMISSION):
        return error_page(request, ErrorView(403, "permission_denied",
                                             "You may read the audit but not dismiss processes.",
                                             f"Ask an administrator for the permission {DISMISS_PERMISSION}."))
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
