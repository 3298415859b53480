"""Built-in template filters for times, counts, sizes, plurals and hidden characters (every template).

Installed as a built-in library (``TEMPLATES[...]["OPTIONS"]["builtins"]``), so no template loads it; each
filter is a thin face over :mod:`dashboard.formatting`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from dashboard import formatting

register = template.Library()


@register.filter
def when(value: Any) -> SafeString | str:
    """A moment as ``2026-01-13 03:44:31 UTC`` in a ``<time>`` whose tooltip is the exact ISO instant.

    Accepts a datetime (naive ones are UTC) or an ISO 8601 string; anything else is shown as "—".
    """
    moment = formatting.as_datetime(value)
    if moment is None:
        return "—"
    utc = moment.astimezone(dt.UTC)
    return format_html('<time datetime="{}" title="{} (UTC, exact)">{}</time>', utc.isoformat(),
                       utc.isoformat(sep=" "), formatting.when_text(utc))


@register.filter
def thousands(value: Any) -> Any:
    """An integer with thousands separators (``1050`` -> ``1,050``); other values unchanged."""
    return formatting.count(value)


@register.filter
def plural(n: Any, forms: str) -> str:
    """``{{ n|plural:"thread" }}`` -> ``1 thread`` / ``1,200 threads``; see :func:`dashboard.formatting.plural`."""
    return formatting.plural(n, forms)


@register.filter
def size(value: Any) -> str:
    """Bytes as ``955.7 KB``; see :func:`dashboard.formatting.size`."""
    return formatting.size(value)


@register.filter
def reveal(value: Any) -> Any:
    """Text with direction overrides and other hidden characters as visible ``\\uXXXX`` escapes."""
    return formatting.reveal_controls(value)
