"""Bounded JSON request bodies: at most ``DASHBOARD_MAX_JSON_BODY_KB`` and :data:`MAX_DEPTH` levels deep.

Every JSON ``POST`` of the API reads its body through :func:`json_body`, so
an oversized or deeply nested body is refused with a 400 naming the bound
before anything is parsed into a form or stored.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from dashboard.errors import ErrorView

__all__ = ["MAX_DEPTH", "BodyRefused", "json_body", "max_body_bytes"]

#: Nesting levels a body may have (an object of lists of objects is 3); the API's bodies need 3.
MAX_DEPTH = 8


class BodyRefused(Exception):
    """The body is too large, too deep, or not a JSON object; ``view`` is the 400 to answer."""

    def __init__(self, view: ErrorView):
        super().__init__(view.detail)
        self.view = view


def max_body_bytes() -> int:
    """The largest body accepted, in bytes (``settings.DASHBOARD_MAX_JSON_BODY_BYTES``)."""
    return settings.DASHBOARD_MAX_JSON_BODY_BYTES


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), computed without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


def json_body(request: HttpRequest, *, hint: str) -> Any:
    """The request's body parsed as JSON (``{}`` for an empty body), within the bounds.

    Args:
        request: the POST request.
        hint: what the body should hold (said with ``json_too_deep``).

    Returns:
        The parsed value, of any JSON type (callers check it is an object, in their own words).

    Raises:
        BodyRefused: 400 ``body_too_large`` (more than :func:`max_body_bytes`, by
            ``Content-Length`` or by the bytes read) or ``json_too_deep`` (more than
            :data:`MAX_DEPTH` levels).
        UnicodeDecodeError, json.JSONDecodeError: the body is not UTF-8 JSON.
    """
    limit = max_body_bytes()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit or len(request.body) > limit:
        raise BodyRefused(ErrorView(400, "body_too_large", f"The body is larger than {limit:,} bytes.",
                                    "Send a smaller body: select many threads with a filter instead of "
                                    "listing their ids (docs/operations.md, Conversion jobs)."))
    try:
        body = json.loads(request.body.decode("utf-8") or "{}")
    except RecursionError:  # nested far beyond MAX_DEPTH
        body = deep = None
    else:
        deep = _depth(body) <= MAX_DEPTH or None
    if deep is None:
        raise BodyRefused(ErrorView(400, "json_too_deep", f"The body nests deeper than {MAX_DEPTH} levels.",
                                    hint))
    return body
