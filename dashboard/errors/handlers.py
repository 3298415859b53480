"""Django's error handlers in the project's error format (``handler404`` & co. and ``CSRF_FAILURE_VIEW``).

Every answer goes through :func:`dashboard.errors.rendering.error_answer`: JSON
``{"detail", "hint", "code"}`` under ``/api/``, the site's error page (layout,
navigation, "What to do") elsewhere, never Django's bare page::

    400  bad_request         handler400: a request Django refuses (e.g. a host not in DJANGO_ALLOWED_HOSTS)
    403  permission_denied   handler403: a view raised PermissionDenied
    403  csrf_failed         CSRF_FAILURE_VIEW: a form or API POST without a valid CSRF token
    404  not_found           handler404: no route, or an object that does not exist
    404  job_not_found       handler404 on a job route (``<int:job_id>``) whose job does not exist
    500  server_error        handler500: an unexpected error (the traceback goes to the log only)

The 405 answers are made by :class:`dashboard.errors.middleware.MethodNotAllowedMiddleware`.
``dashboard.urls`` (``handler400`` ...) and ``settings.CSRF_FAILURE_VIEW`` name these views by this module's path.
"""

from __future__ import annotations

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse

from dashboard.errors.registry import ErrorView, view
from dashboard.errors.rendering import error_answer

__all__ = ["bad_request", "csrf_failure", "not_found", "permission_denied", "server_error"]

#: What to do after a CSRF failure, for a browser form and for an API client.
CSRF_PAGE_HINT = "Reload the page and submit again; your session may have expired."
CSRF_API_HINT = ("Send Authorization: Bearer <token> (no CSRF token needed), or the CSRF token of your session "
                 "in the X-CSRFToken header.")


def _not_found_view(request: HttpRequest) -> ErrorView:
    if request.path.startswith("/api/"):
        return ErrorView(404, "not_found", f"No API route at {request.path}.",
                         "See docs/api.md for the routes.")
    match = request.resolver_match
    job_id = match.kwargs.get("job_id") if match else None
    if job_id is not None:
        return view("job_not_found", f"No job {job_id}.")
    return ErrorView(404, "not_found", f"No page at {request.path}.",
                     "Check the address, or go on from the navigation above (Threads, Jobs, Fleet audit).")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: an unknown URL, or a view's ``Http404`` (e.g. ``/jobs/999/``)."""
    return error_answer(request, _not_found_view(request))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a POST without a valid CSRF token (``reason`` is Django's, e.g. "CSRF token missing")."""
    api = request.path.startswith("/api/")
    detail = f"CSRF verification failed: {reason.rstrip('.')}." if reason else "CSRF verification failed."
    return error_answer(request, ErrorView(403, "csrf_failed", detail, CSRF_API_HINT if api else CSRF_PAGE_HINT))


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler400``: a request Django refuses before any view (a host it does not serve, a malformed request)."""
    if isinstance(exception, DisallowedHost):
        hint = "Open the dashboard by one of its configured addresses (DJANGO_ALLOWED_HOSTS)."
    else:
        hint = "Check the address and what was sent, then try again from the page's own links and forms."
    return error_answer(request, ErrorView(400, "bad_request", "The server could not accept this request.", hint))


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler403``: a view raised ``PermissionDenied``."""
    return error_answer(request, view("permission_denied", "You may not do this."))


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: an unexpected error; Django has logged the traceback, the answer carries none."""
    return error_answer(request, view("server_error",
                                      f"The server failed while answering {request.method} {request.path}."))
