"""Security headers (a strict Content-Security-Policy, no inline script) and the API's bearer-token CSRF rule.

The error answers and the error middleware live in :mod:`dashboard.errors`
(:mod:`~dashboard.errors.rendering`, :mod:`~dashboard.errors.middleware`).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from dashboard.errors import ErrorView, json_error

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "AnonymousApiMiddleware",
    "BearerTokenCsrfMiddleware",
    "ContentSecurityPolicyMiddleware",
    "NoStoreMiddleware",
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
            request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]  # CsrfViewMiddleware's flag
        return self.get_response(request)


class NoStoreMiddleware:
    """``Cache-Control: no-store`` (Django's ``add_never_cache_headers``) on every authenticated response.

    Thread content must not stay in a browser's or a proxy's cache after
    logout. A response counts as authenticated when the request's user is
    (a session, or a bearer token: the API's check sets ``request.user``).
    When the user cannot be loaded (Django's database is down) the answer
    is marked no-store too: being unsure is treated as private.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from django.utils.cache import add_never_cache_headers

        response = self.get_response(request)
        try:
            private = request.user.is_authenticated
        except Exception:  # noqa: BLE001 - the session store is down: an error answer, kept private anyway
            private = True
        if private:
            add_never_cache_headers(response)
        return response


class AnonymousApiMiddleware:
    """An ``/api/`` request with neither a session nor a bearer token answers 401 before the CSRF check.

    Any other ``Authorization`` scheme (``Basic``, an empty ``Bearer``) is no credential here.

    Placed after ``AuthenticationMiddleware`` and before ``CsrfViewMiddleware``
    (whose check runs in ``process_view``): without it an anonymous ``POST``
    was refused as a CSRF failure, which tells the caller to send a CSRF
    token when what it lacks is a credential.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view, args, kwargs) -> HttpResponse | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if not request.path.startswith("/api/") or (scheme.lower() == "bearer" and token.strip()):
            return None  # a bearer token is checked by the view (401 invalid_token when wrong)
        if request.user.is_authenticated:
            return None
        return json_error(ErrorView(401, "authentication_required", "Authentication required.",
                                    "Log in as a staff user or send Authorization: Bearer <token>."))
