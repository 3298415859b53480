"""404 handler: JSON ``{"detail", "hint", "code"}`` under ``/api/``, Django's page elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Answer an unknown URL; API clients get the same error shape as every other API error."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"No API route at {request.path}.",
                             "hint": "See the JSON API table in the README for the routes.",
                             "code": "not_found"}, status=404)
    return page_not_found(request, exception)
