"""Fleet JSON API: ``GET /api/audit`` and ``POST /api/processes/heartbeat``."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from dashboard.accounts.auth import api_staff_required, scope_refusal
from dashboard.errors import ErrorView, invalid_parameters, json_error
from dashboard.fleet.audit import run_audit
from dashboard.fleet.forms import ExternalHeartbeatForm
from dashboard.fleet.models import ProcessRecord
from dashboard.fleet.registry import record_external
from dashboard.fleet.schemas import check_heartbeat_body
from dashboard.jsonbody import BodyRefused, json_body
from dashboard.runtime import get_runtime

#: What posting a heartbeat needs besides staff (a viewer must not add fleet members).
HEARTBEAT_PERMISSION = "fleet.report_heartbeat"


@require_GET
@api_staff_required
def audit(request: HttpRequest) -> JsonResponse:
    """``{"processes", "live", "findings", "census", "cadences", "writers", "readiness"[, "threads"]}``."""
    with_threads = request.GET.get("threads") in ("1", "true", "yes")
    return JsonResponse(run_audit(get_runtime(), with_threads=with_threads).as_dict(with_threads=with_threads))


@require_POST
@api_staff_required
def heartbeat(request: HttpRequest) -> HttpResponse:
    """Record an outside process's heartbeat; body is JSON (see ExternalHeartbeatForm).

    Needs :data:`HEARTBEAT_PERMISSION` and, with a token, the ``heartbeat`` scope.
    """
    rejected = scope_refusal(request, "heartbeat")
    if rejected is not None:
        return rejected
    if not request.user.has_perm(HEARTBEAT_PERMISSION):
        return json_error(ErrorView(403, "permission_denied", "Staff access does not include reporting processes.",
                                    f"Ask an administrator for the permission {HEARTBEAT_PERMISSION} for the "
                                    "account whose token the outside process sends."))
    try:
        body = json_body(request, hint=("Send a JSON object (see the heartbeat snippet in docs/operations.md, "
                                        "Fleet audit, for the fields)."))
    except BodyRefused as exc:
        return json_error(exc.view)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return json_error(ErrorView(400, "invalid_json", f"Body is not JSON: {exc}", "Send a JSON object."))
    if not isinstance(body, dict):
        return json_error(ErrorView(400, "invalid_json", "Body must be a JSON object.", "Send a JSON object."))
    try:
        check_heartbeat_body(body)
    except BodyRefused as exc:
        return json_error(exc.view)
    form = ExternalHeartbeatForm(body)
    if not form.is_valid():
        return json_error(invalid_parameters(
            form, what="heartbeat",
            hint="See the heartbeat snippet in docs/operations.md (Fleet audit) for the fields."))
    instance_id = form.cleaned_data["instance_id"]
    if ProcessRecord.objects.filter(instance_id=instance_id).exclude(role="external").exists():
        return json_error(ErrorView(409, "instance_conflict",
                                    f"instance_id {instance_id} belongs to a dashboard web or worker process.",
                                    "Generate a fresh instance_id (uuid4().hex) when the outside process starts."))
    record = record_external(form.cleaned_data)
    return JsonResponse({"name": record.name, "instance_id": record.instance_id,
                         "last_heartbeat": record.last_heartbeat.isoformat()})
