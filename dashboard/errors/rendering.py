"""How every error is answered: JSON ``{"detail", "hint", "code"}`` under ``/api/``, the site's error page
elsewhere (:func:`error_answer`), for an :class:`~dashboard.errors.registry.ErrorView`.
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, JsonResponse

from dashboard.fragments import wants_fragment

__all__ = ["RETRY_AFTER_S", "error_answer", "error_page", "json_error"]

log = logging.getLogger("dashboard.outages")
#: Seconds a client should wait before retrying after an outage answer.
RETRY_AFTER_S = 10


def error_page(request: HttpRequest, view, **extra) -> HttpResponse:
    """The error page for ``view`` (an :class:`~dashboard.errors.ErrorView`): the site's layout, or its fragment
    for an htmx swap; plain text (still detail and hint, never a traceback) if the page itself cannot render.

    When Django's own database is the one down (``dashboard_database_unavailable``), the page is
    rendered as for an anonymous user, since loading the session's user would
    fail again.
    """
    from django.contrib.auth.models import AnonymousUser
    from django.shortcuts import render

    fragment = wants_fragment(request)
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
