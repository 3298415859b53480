"""Security headers (a strict Content-Security-Policy, no inline script), the 503 answer to outages,
and the one way every error is answered: JSON ``{"detail", "hint", "code"}`` under ``/api/``, the site's
error page elsewhere (:func:`error_answer`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse

log = logging.getLogger("dashboard.outages")
#: Seconds a client should wait before retrying after an outage answer.
RETRY_AFTER_S = 10

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def error_page(request: HttpRequest, view, **extra) -> HttpResponse:
    """The error page for ``view`` (an :class:`~dashboard.errors.ErrorView`): the site's layout, or its fragment
    for an htmx swap; plain text (still detail and hint, never a traceback) if the page itself cannot render.

    When Django's own database is the one down (``dashboard_database_unavailable``), the page is
    rendered as for an anonymous user, since loading the session's user would
    fail again.
    """
    from django.contrib.auth.models import AnonymousUser
    from django.shortcuts import render

    htmx = getattr(request, "htmx", None)
    fragment = bool(htmx) and not htmx.history_restore_request
    context: dict = {"error": view, **extra}
    if view.code == "dashboard_database_unavailable":
        context["user"] = AnonymousUser()
    try:
        return render(request, "errors/_error.html" if fragment else "errors/error.html", context,
                      status=view.status)
    except Exception:  # the page itself needs what is down: plain text, still no traceback
        log.exception("rendering the %s page failed", view.code)
        return HttpResponse(f"HTTP {view.status}: {view.detail}\nWhat to do: {view.hint}\n",
                            status=view.status, content_type="text/plain; charset=utf-8")


def json_error(view) -> JsonResponse:
    """The API's answer for ``view`` (an :class:`~dashboard.errors.ErrorView`): ``{"detail", "hint", "code"}``
    with the view's status."""
    return JsonResponse(view.as_json(), status=view.status)


def error_answer(request: HttpRequest, view, **extra) -> HttpResponse:
    """:func:`json_error` under ``/api/``; :func:`error_page` elsewhere."""
    if request.path.startswith("/api/"):
        return json_error(view)
    return error_page(request, view, **extra)


class ContentSecurityPolicyMiddleware:
    """Adds :data:`CONTENT_SECURITY_POLICY` and ``Referrer-Policy: same-origin`` to every response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response


class OutageMiddleware:
    """A database or the broker cannot be reached: answer 503 with what, where and what to do, never a traceback.

    Catches :data:`dashboard.outages.OUTAGES` raised by any view. ``/api/``
    routes answer ``{"detail", "hint", "code"}``; pages answer the error page
    (the fragment for htmx swaps). When Django's own database is the one
    down, the page is rendered as for an anonymous user, since loading the
    session's user would fail again.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from dashboard.errors import describe
        from dashboard.outages import is_outage

        if not is_outage(exception):
            return None
        view = describe(exception)
        log.error("%s on %s %s: %s (%s: %s)", view.code, request.method, request.path, view.hint,
                  type(exception).__name__, exception)
        response = error_answer(request, view)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response


class DamagedCheckpointMiddleware:
    """A thread route failed while decoding stored data: name the damaged checkpoint instead of a 500.

    LangGraph's readers fail on a damaged blob with whatever the decoder
    raises (``ValueError: invalid type Reserved``, ``TypeError``, ...). When a
    thread route raises such an error, this checks the thread's stored values
    one by one (:func:`deerflow.blobcheck.decode_error_for`); if one does not
    decode, the answer is the registry's 422 naming the thread, the
    checkpoint and the part; otherwise the error goes on as before.
    """

    DECODE_FAILURES = (ValueError, TypeError, KeyError, AttributeError, IndexError, EOFError)

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, self.DECODE_FAILURES):
            return None
        match = request.resolver_match
        thread_id = (match.kwargs.get("thread_id") if match else None) or request.GET.get("thread_id")
        if not thread_id:
            return None
        from dashboard.errors import describe
        from dashboard.runtime import get_runtime
        from deerflow.blobcheck import decode_error_for

        try:
            damaged = decode_error_for(get_runtime().saver, thread_id)
        except Exception:  # the check itself failed: keep the original error
            log.exception("checking thread %r for undecodable rows failed", thread_id)
            return None
        if damaged is None:
            return None
        view = describe(damaged)
        log.error("%s (%s: %s)", damaged, type(exception).__name__, exception)
        return error_answer(request, view, thread_id=thread_id)


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


class MethodNotAllowedMiddleware:
    """Gives Django's bare 405 (``require_GET``/``require_POST``: empty ``text/html``) the project's error format.

    ``/api/`` routes answer ``{"detail", "hint", "code": "method_not_allowed"}``
    like the thread API's own 405; pages answer the error page. The ``Allow``
    header is kept. A 405 that already has a body is left alone.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not isinstance(response, HttpResponseNotAllowed) or response.content:
            return response
        allowed = [m.strip() for m in response.get("Allow", "").split(",") if m.strip()]
        answer = error_answer(request, _not_allowed(request, allowed))
        answer["Allow"] = ", ".join(allowed)
        return answer


def _not_allowed(request: HttpRequest, allowed: list[str]):
    """The ``method_not_allowed`` :class:`~dashboard.errors.ErrorView` for ``request`` (``allowed``: methods)."""
    from dashboard.errors import ErrorView

    methods = " or ".join(allowed) or "no method"
    if request.path.startswith("/api/"):
        hint = f"Send {methods} to this route (the JSON API table in the README lists each route's methods)."
    elif "GET" not in allowed:
        hint = (f"This address only receives form submissions ({methods}); go back to the page with the form "
                "and submit it there.")
    else:
        hint = f"This address only takes {methods}; open it from the navigation above."
    return ErrorView(405, "method_not_allowed", f"Method {request.method} is not allowed at {request.path}.", hint)


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
        from dashboard.errors import ErrorView

        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if not request.path.startswith("/api/") or (scheme.lower() == "bearer" and token.strip()):
            return None  # a bearer token is checked by the view (401 invalid_token when wrong)
        if request.user.is_authenticated:
            return None
        return json_error(ErrorView(401, "authentication_required", "Authentication required.",
                                    "Log in as a staff user or send Authorization: Bearer <token>."))
