"""The audit log of writes: every POST, PUT, PATCH or DELETE by an authenticated user becomes an AuditEntry.

Who (user, session or token and its prefix), what (method, path, route
name, status: refusals are recorded too), when, and from where (the
address the login throttle counts, :func:`dashboard.accounts.throttle.client_ip`).
Superusers browse it at ``/admin/accounts/auditentry/``. Heartbeats are left
out: each outside process sends one every few seconds, and the fleet
registry keeps their last state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

__all__ = ["UNRECORDED_ROUTES", "AuditLogMiddleware", "record"]

log = logging.getLogger("dashboard.audit")
_SAFE = {"GET", "HEAD", "OPTIONS", "TRACE"}
#: Route names whose writes are not recorded.
UNRECORDED_ROUTES = {"api-heartbeat"}


def record(request: HttpRequest, response: HttpResponse) -> None:
    """Store the AuditEntry for a write ``request`` answered by ``response`` (a no-op for reads and anonymous)."""
    from dashboard.accounts.models import AuditEntry
    from dashboard.accounts.throttle import client_ip

    if request.method in _SAFE:
        return
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return
    match = request.resolver_match
    action = match.view_name if match else ""
    if action in UNRECORDED_ROUTES:
        return
    token = getattr(request, "api_token", None)
    AuditEntry.objects.create(
        user=user, username=user.get_username(), via="token" if token else "session",
        token_prefix=token.prefix if token else "", method=(request.method or "")[:8], path=request.path[:2048],
        action=action[:100], status=response.status_code, remote_addr=(client_ip(request) or "")[:64])


class AuditLogMiddleware:
    """Calls :func:`record` after each answer; a failure to record is logged, never turned into an error page."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        try:
            record(request, response)
        except Exception:  # the dashboard database is down: the answer already says so
            log.exception("recording the audit entry for %s %s failed", request.method, request.path)
        return response
