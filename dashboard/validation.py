"""Hostile scalars in a request: refused with a 400 and a code before any view or store sees them.

A NUL byte cannot be stored in a Postgres text column (psycopg refuses the
query) and names nothing in SQLite either; an integer past 64 bits cannot be
a row id in either store. Both can arrive in a path parameter (a thread id
in ``<path:…>``, a job id in ``<int:…>``), or in any query or form value.
:class:`HostileInputMiddleware` checks every route's path parameters and
every query and form key and value once, in ``process_view``, and answers
400 ``invalid_parameters`` (JSON under ``/api/``, the error page elsewhere)
naming the parameter and what to do. Query values the views read are also
validated by their Django forms (lengths, ranges); this layer only removes
what no store can hold. JSON body size and depth are bounded by the API's
request parsing, not here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.http.request import RawPostDataException

from dashboard.errors import ErrorView

__all__ = ["HostileInputMiddleware", "MAX_STORED_INT", "hostile_parameter"]

#: The largest integer either store holds in an id column (signed 64-bit).
MAX_STORED_INT = 2**63 - 1
NUL = "\x00"


def _name(name: str) -> str:
    return name.replace(NUL, "\\x00")


def hostile_parameter(where: str, items: Iterable[tuple[str, Any]]) -> str | None:
    """The first hostile scalar among ``items``, as a sentence, or ``None``.

    Args:
        where: ``"path parameter"``, ``"query parameter"`` or ``"form field"``.
        items: ``(name, value)`` pairs; a ``str`` value is checked for NUL bytes,
            an ``int`` for the 64-bit range (``bool`` is not an integer here).

    Returns:
        E.g. ``"path parameter thread_id contains a NUL byte (\\x00)"``.
    """
    for name, value in items:
        if NUL in name:
            return f"a {where} name contains a NUL byte (\\x00): {_name(name)!r}"
        if isinstance(value, str) and NUL in value:
            return f"{where} {name} contains a NUL byte (\\x00), which no stored value can hold"
        if (isinstance(value, int) and not isinstance(value, bool)
                and not -MAX_STORED_INT - 1 <= value <= MAX_STORED_INT):
            return (f"{where} {name} is {len(str(abs(value)))} digits long, "
                    f"past the largest stored id ({MAX_STORED_INT})")
    return None


def _pairs(query: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    for name in query:
        for value in query.getlist(name) if hasattr(query, "getlist") else [query[name]]:
            yield name, value


def _keep_body(request: HttpRequest) -> None:
    """Read (and keep) the body before the form is parsed, so a JSON view behind us can still read it.

    Parsing ``request.POST`` alone would consume the stream. When something
    earlier (the CSRF check) already parsed the form, the stream is gone and
    the form is what there is: nothing to keep.
    """
    try:
        request.body  # noqa: B018 - the property reads and caches the body
    except RawPostDataException:
        pass


class HostileInputMiddleware:
    """Answer 400 ``invalid_parameters`` to a NUL byte or an out-of-range integer anywhere in a request's
    path parameters, query string or form body, on every route (see the module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> HttpResponse | None:
        """``None`` to let the view run; else the 400 answer."""
        reason = (hostile_parameter("path parameter", view_kwargs.items())
                  or hostile_parameter("path parameter", ((f"#{i}", v) for i, v in enumerate(view_args)))
                  or hostile_parameter("query parameter", _pairs(request.GET)))
        if reason is None and request.method == "POST" and request.content_type in (
                "application/x-www-form-urlencoded", "multipart/form-data"):
            _keep_body(request)
            reason = hostile_parameter("form field", _pairs(request.POST))
        if reason is None:
            return None
        from dashboard.errors import error_answer

        hint = ("Use an id this database can hold (at most 19 digits), then retry." if "digits long" in reason
                else "Remove the NUL byte, then retry.")
        return error_answer(request, ErrorView(400, "invalid_parameters", f"Invalid request: {reason}.", hint))
