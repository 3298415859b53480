"""The /audit/ page (one template; the body fragment is what htmx refreshes)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.accounts.auth import staff_required
from dashboard.fleet.audit import run_audit
from dashboard.runtime import get_runtime


@require_GET
@staff_required
def audit_page(request: HttpRequest) -> HttpResponse:
    """``/audit/``: processes, findings, census, cadences, writers and readiness."""
    audit = run_audit(get_runtime())
    fragment = request.htmx and not request.htmx.history_restore_request  # a restore needs the whole page
    template = "fleet/_audit_body.html" if fragment else "fleet/audit.html"
    return render(request, template, {"audit": audit})
