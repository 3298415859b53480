"""Access checks: staff session for pages; staff session or bearer token for the API; token scopes."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import authenticate
from django.http import HttpRequest, HttpResponse

from dashboard.accounts.throttle import token_credential
from dashboard.errors import ErrorView, json_error

__all__ = ["api_staff_required", "scope_refusal", "staff_required"]

_SAFE = ("GET", "HEAD", "OPTIONS")


def staff_required(view: Callable) -> Callable:
    """HTML views: redirect anonymous and non-staff users to the login page."""
    return staff_member_required(view, login_url="login")


def _bearer(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def api_staff_required(view: Callable) -> Callable:
    """API views: a staff session or ``Authorization: Bearer <token>``; else 401 JSON (403 for non-staff)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        raw = _bearer(request)
        if raw is not None:
            # Through Django's authenticate(): django-axes counts a bad token like a bad password.
            user = authenticate(request, api_token=raw, credential=token_credential(raw))
            if user is None:
                return json_error(ErrorView(401, "invalid_token", "Invalid or revoked API token.",
                                            "Create a new token with: python manage.py create_api_token <username>"))
            request.user = user  # CSRF: BearerTokenCsrfMiddleware exempted this request already
        elif not request.user.is_authenticated:
            return json_error(ErrorView(401, "authentication_required", "Authentication required.",
                                        "Log in as a staff user or send Authorization: Bearer <token>."))
        if not request.user.is_staff:
            return json_error(ErrorView(403, "staff_required", "Staff access required.",
                                        "Ask an administrator to mark your account as staff."))
        if request.method in _SAFE:
            refused = scope_refusal(request, "read")
            if refused is not None:
                return refused
        return view(request, *args, **kwargs)

    return wrapper


def scope_refusal(request: HttpRequest, scope: str) -> HttpResponse | None:
    """A 403 ``token_scope`` when the request's bearer token lacks ``scope``; ``None`` otherwise.

    Sessions carry no scopes (their user's permissions decide alone); a
    token may do what its scopes allow *and* its user's permissions allow.
    """
    token = getattr(request, "api_token", None)
    if token is None or token.allows(scope):
        return None
    return json_error(ErrorView(
        403, "token_scope", f"This API token ({token.prefix}…) does not carry the {scope!r} scope; "
        f"it carries {', '.join(token.scopes) or 'none'}.",
        f"Issue a token with it: python manage.py create_api_token {token.user.get_username()} --scope {scope}"))
