"""Links to thread pages that survive a browser's path normalization.

Thread ids are arbitrary strings. ``reverse()`` percent-encodes them but keeps
``/`` and dot segments, and browsers (the WHATWG URL standard) collapse ``.``
and ``..`` path segments before sending a request, percent-encoded ones
(``%2e``) included: a link to the thread ``../x`` would open another page.

So an id with a dot segment gets its slashes encoded as ``%2F`` (the id then
fills one path segment, and WSGI decodes it back to ``/``); the ids ``.`` and
``..`` themselves, dot segments whatever the encoding, travel as the
``thread_id`` query parameter of the ``*-by-query`` routes instead. Every
other id keeps the readable ``reverse()`` form.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from django.urls import reverse

__all__ = ["thread_url"]

#: Path route name -> the route taking ``?thread_id=`` for ids that cannot be a path.
_BY_QUERY = {"threads:detail": "thread-detail-by-query", "thread-history": "thread-history-by-query"}
_DOT_SEGMENTS = {".", ".."}


def thread_url(name: str, thread_id: str, **query: str | None) -> str:
    """The URL of route ``name`` (``threads:detail`` or ``thread-history``) for ``thread_id``.

    Args:
        name: a route taking ``<path:thread_id>``.
        thread_id: any string.
        query: extra query parameters; ``None`` values are left out.
    """
    params = {k: v for k, v in query.items() if v is not None}
    if thread_id in _DOT_SEGMENTS:
        path = reverse(_BY_QUERY[name])
        params = {"thread_id": thread_id, **params}
    elif any(segment in _DOT_SEGMENTS for segment in thread_id.split("/")):
        placeholder = "thread-id-placeholder"
        path = reverse(name, args=[placeholder]).replace(placeholder, quote(thread_id, safe=""), 1)
    else:
        path = reverse(name, args=[thread_id])
    return f"{path}?{urlencode(params)}" if params else path
