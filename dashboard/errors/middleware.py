"""The middleware that turns errors into the project's answers (:mod:`dashboard.errors.rendering`).

* :class:`OutageMiddleware`: a database or the broker is down: 503 with what, where and what to do;
* :class:`DamagedCheckpointMiddleware`: a thread route failed decoding stored data: the registry's 422;
* :class:`MethodNotAllowedMiddleware`: Django's bare 405 in the project's error format.

``settings.MIDDLEWARE`` names them by this module's path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed

from dashboard.errors.rendering import RETRY_AFTER_S, error_answer, log

if TYPE_CHECKING:
    from dashboard.errors.registry import ErrorView

__all__ = ["DamagedCheckpointMiddleware", "MethodNotAllowedMiddleware", "OutageMiddleware", "not_allowed_view"]


class OutageMiddleware:
    """A database or the broker cannot be reached: answer 503 with what, where and what to do, never a traceback.

    Catches :data:`dashboard.errors.outages.OUTAGES` raised by any view. ``/api/``
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
        from dashboard.errors.outages import is_outage
        from dashboard.errors.registry import describe

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
    one by one (:func:`deerflow.reader.blobcheck.decode_error_for`); if one does not
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
        from dashboard.errors.registry import describe
        from dashboard.runtime import get_runtime
        from deerflow.reader import decode_error_for

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
        answer = error_answer(request, not_allowed_view(request, allowed))
        answer["Allow"] = ", ".join(allowed)
        return answer


def not_allowed_view(request: HttpRequest, allowed: list[str], hint: str | None = None) -> ErrorView:
    """The ``method_not_allowed`` :class:`~dashboard.errors.ErrorView` for ``request``: the one 405 of the site.

    Args:
        allowed: the methods the route takes (the ``Allow`` header).
        hint: a route's own advice in place of the generic one (the thread API's "read-only; use GET").
    """
    from dashboard.errors.registry import ErrorView  # noqa: F811 - at run time (registry imports rendering)

    detail = f"Method {request.method} is not allowed at {request.path}."
    if hint is not None:
        return ErrorView(405, "method_not_allowed", detail, hint)
    methods = " or ".join(allowed) or "no method"
    if request.path.startswith("/api/"):
        hint = f"Send {methods} to this route (docs/api.md lists each route's methods)."
    elif "GET" not in allowed:
        hint = (f"This address only receives form submissions ({methods}); go back to the page with the form "
                "and submit it there.")
    else:
        hint = f"This address only takes {methods}; open it from the navigation above."
    return ErrorView(405, "method_not_allowed", detail, hint)
