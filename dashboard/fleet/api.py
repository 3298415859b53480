"""Fleet JSON API: ``GET /api/audit`` and ``POST /api/processes/heartbeat``."""

from __future__ import annotations

import json

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from dashboard.accounts.auth import api_staff_required
from dashboard.fleet.audit import run_audit
from dashboard.fleet.forms import ExternalHeartbeatForm
from dashboard.fleet.registry import record_external
from dashboard.runtime import get_runtime
from dashboard.threads.forms import form_errors


@require_GET
@api_staff_required
def audit(request: HttpRequest) -> JsonResponse:
    """``{"processes", "live", "findings", "census", "cadences", "writers", "readiness"[, "threads"]}``."""
    with_threads = request.GET.get("threads") in ("1", "true", "yes")
    return JsonResponse(run_audit(get_runtime()).as_dict(with_threads=with_threads))


@csrf_exempt
@require_POST
@api_staff_required
def heartbeat(request: HttpRequest) -> JsonResponse:
    """Record an outside process's heartbeat; body is JSON (see ExternalHeartbeatForm)."""
    try:
        body = json.loads(request.body.decode("utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return JsonResponse({"detail": f"Body is not JSON: {exc}", "hint": "Send a JSON object.",
                             "code": "invalid_json"}, status=400)
    if not isinstance(body, dict):
        return JsonResponse({"detail": "Body must be a JSON object.", "hint": "Send a JSON object.",
                             "code": "invalid_json"}, status=400)
    form = ExternalHeartbeatForm(body)
    if not form.is_valid():
        return JsonResponse({"detail": f"Invalid heartbeat: {form_errors(form)}",
                             "hint": "See the README's snippet for the fields.", "code": "invalid_parameters"},
                            status=400)
    record = record_external(form.cleaned_data)
    return JsonResponse({"name": record.name, "instance_id": record.instance_id,
                         "last_heartbeat": record.last_heartbeat.isoformat()})
