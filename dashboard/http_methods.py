"""``HEAD`` is answered as ``GET`` without the body, on every route (RFC 9110, section 9.3.2).

Django's ``require_GET`` (and ``require_http_methods(["GET", ...])``) refuse ``HEAD`` with a 405, so a
load balancer's ``HEAD /healthz`` or a link checker saw "method not allowed" on routes that serve ``GET``.
:class:`HeadAsGetMiddleware` runs the request as a ``GET`` through the rest of the stack (the same
authentication, permission and throttling as a ``GET``: nothing a ``GET`` may not see is disclosed), then
sends the ``GET``'s status and headers, ``Content-Length`` included, with an empty body.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

__all__ = ["HeadAsGetMiddleware"]


class HeadAsGetMiddleware:
    """Answer ``HEAD`` as the route answers ``GET``, headers only (see the module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method != "HEAD":
            return self.get_response(request)
        request.method = "GET"
        try:
            response = self.get_response(request)
        finally:
            request.method = "HEAD"
        if isinstance(response, StreamingHttpResponse):
            response.streaming_content = []
        else:
            response.setdefault("Content-Length", str(len(response.content)))
            response.content = b""
        return response
