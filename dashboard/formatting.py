"""The pages' one way of writing times, counts, sizes and plurals (the template filters call these).

Every template reaches them as built-in filters (:mod:`dashboard.templatetags.formatting`); Python code
that writes words for people (audit findings, job summaries, error details) calls the same functions, so
a time reads ``2026-12-05 15:13:52 UTC`` and a count ``1,200`` wherever it appears.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from typing import Any

__all__ = ["as_datetime", "count", "plural", "reveal_controls", "size", "when_text"]


def as_datetime(value: Any) -> dt.datetime | None:
    """``value`` as an aware datetime: a datetime (naive ones are UTC) or an ISO 8601 string; else ``None``."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, str) and value:
        try:
            return as_datetime(dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def when_text(value: Any) -> str:
    """A moment as the pages write it: ``2026-12-05 15:13:52 UTC`` (seconds, UTC); ``—`` when unknown.

    Args:
        value: a datetime or an ISO 8601 string (see :func:`as_datetime`); anything else is unknown.
    """
    moment = as_datetime(value)
    return "—" if moment is None else moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def count(value: Any) -> Any:
    """An integer with thousands separators (``1200`` -> ``1,200``); other values unchanged."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value


def plural(n: Any, forms: str) -> str:
    """``n`` and the noun phrase that agrees with it: ``plural(1, "thread")`` -> ``1 thread``,
    ``plural(1200, "thread")`` -> ``1,200 threads``.

    Args:
        n: a count (an int, or anything with ``len``).
        forms: ``"singular"`` (plural adds ``s``) or ``"singular,plural"`` for irregular ones and phrases
            with a verb (``"thread matches,threads match"``, ``"file keeps its size,files keep their size"``).
    """
    number = n if isinstance(n, int) else len(n)
    one, _, many = forms.partition(",")
    return f"{count(number)} {one if number == 1 else (many or one + 's')}"


def size(value: Any) -> str:
    """Bytes in the largest unit that keeps the number at least 1 (``978.5 KB``, 1 KB = 1,024 bytes), as
    Django's ``filesizeformat`` writes them (a no-break space before the unit); ``—`` for a missing value."""
    from django.template.defaultfilters import filesizeformat

    if value is None or value == "":
        return "—"
    return str(filesizeformat(value))


#: Characters that reorder or hide text: the bidirectional overrides, embeddings and isolates, and marks.
_CONTROLS = frozenset("\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def reveal_controls(text: Any) -> Any:
    """``text`` with every character that reorders or hides text written as a visible escape (``\\u202e``).

    A name holding U+202E (RIGHT-TO-LEFT OVERRIDE) would otherwise display reversed ("evil\\u202eexe.txt"
    reads as "eviltxt.exe"); other format characters (category Cf, e.g. zero-width ones) too. Non-strings
    are returned unchanged. The result is still escaped by the template like any text.
    """
    if not isinstance(text, str):
        return text
    if not any(c in _CONTROLS or unicodedata.category(c) == "Cf" for c in text):
        return text
    return "".join(f"\\u{ord(c):04x}" if c in _CONTROLS or unicodedata.category(c) == "Cf" else c for c in text)
