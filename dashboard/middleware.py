"""Security headers (a strict Content-Security-Policy, no inline script) and the API's bearer-token CSRF rule.

The error answers and the error middleware live in :mod:`dashboard.errors`
(:mod:`~dashboard.errors.rendering`, :mod:`~dashboard.errors.middleware`);
their names are re-exported here, where ``settings.MIDDLEWARE`` and older
imports find them.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from dashboard.errors.middleware import (
    DamagedCheckpointMiddleware,
    MethodNotAllowedMiddleware,
    OutageMiddleware,
)
from dashboard.errors.rendering import RETRY_AFTER_S, error_answer, error_page, json_error, log

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "RETRY_AFTER_S",
    "BearerTokenCsrfMiddleware",
    "ContentSecurityPolicyMiddleware",
    "DamagedCheckpointMiddleware",
    "MethodNotAllowedMiddleware",
    "OutageMiddleware",
    "error_answer",
    "error_page",
    "json_error",
    "log",
]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    """Adds :data:`CONTENT_SECURITY_POLICY` and ``Referrer-Policy: same-origin`` to every response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response


class BearerTokenCsrfMiddleware:
    """API requests that carry ``Authorization: Bearer`` skip Django's CSRF check (placed before it).

    CSRF protects ambient credentials (the session cookie); a bearer token is
    not ambient, a cross-site form cannot set the header, and the API's
    ``api_staff_required`` authenticates such a request by its token alone (a
    bad token is a 401, never rescued by a session). Without this, a token
    request with the wrong method (``POST /api/threads``) was refused as a
    CSRF failure telling the caller to send the bearer token it had sent,
    instead of the 405 it is.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if request.path.startswith("/api/") and scheme.lower() == "bearer" and token.strip():
            request._dont_enforce_csrf_checks = True
        return self.get_response(request)
