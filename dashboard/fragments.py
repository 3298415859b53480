"""The one fragment choice of the web layer: does this request want an htmx fragment or the whole page?

django-htmx's ``HtmxMiddleware`` sets ``request.htmx`` (:class:`django_htmx.middleware.HtmxDetails`);
views ask these functions instead of reading it, so every page makes the same choice
(``tests/dashboard/test_web_conventions.py`` checks that no other module reads ``request.htmx``).
"""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

__all__ = ["is_htmx", "wants_fragment"]


def _details(request: HttpRequest) -> HtmxDetails | None:
    details = getattr(request, "htmx", None)
    return details if isinstance(details, HtmxDetails) else None


def is_htmx(request: HttpRequest) -> bool:
    """True when htmx sent the request (``HX-Request: true``), a history restore included."""
    details = _details(request)
    return details is not None and bool(details)


def wants_fragment(request: HttpRequest, target: str | None = None) -> bool:
    """True when the answer should be a fragment: an htmx swap, not htmx's history restore.

    A history restore (a cache miss on back/forward) replaces the whole body, so it gets the whole page.

    Args:
        target: when given, only a swap aimed at the element with this id (``HX-Target``) wants the fragment.
    """
    details = _details(request)
    if details is None or not details or details.history_restore_request:
        return False
    return target is None or details.target == target
