"""The pages' one way of writing times, counts, sizes and plurals (the template filters call these).

Every template reaches them as built-in filters (:mod:`dashboard.templatetags.formatting`); Python code
that writes words for people (audit findings, job summaries, error details) calls the same functions, so
a time reads ``2026-12-05 15:13:52 UTC`` and a count ``1,200`` wherever it appears.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from typing import Any

__all__ = ["as_datetime", "columns", "count", "middle_ellipsis", "plural", "reveal_controls", "size", "when_text"]


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


def columns(text: str) -> int:
    """How many character cells ``text`` takes in a fixed-width font: wide and full-width characters (East Asian
    width ``W``/``F``, per Unicode UAX #11) take two, every other character one."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def middle_ellipsis(text: str, width: int) -> str:
    """``text`` shortened to at most ``width`` cells (:func:`columns`) by an ellipsis in the middle, so both ends
    stay readable: ``middle_ellipsis("thread-0123456789-final", 12)`` -> ``"thread…final"``. Text that fits is
    returned unchanged.

    Args:
        text: any string (an id, a name); it is not escaped here, the template escapes it.
        width: the most cells the result may take, at least 3.

    Raises:
        ValueError: ``width`` under 3 (no room for a character on each side of the ellipsis).
    """
    if width < 3:
        raise ValueError(f"middle_ellipsis needs a width of at least 3 cells; got {width}.")
    if columns(text) <= width:
        return text
    room = width - 1
    head_room, tail_room = room - room // 2, room // 2
    head, used = "", 0
    for c in text:
        if used + columns(c) > head_room:
            break
        head, used = head + c, used + columns(c)
    tail, used = "", 0
    for c in reversed(text[len(head):]):
        if used + columns(c) > tail_room:
            break
        tail, used = c + tail, used + columns(c)
    return f"{head}…{tail}"


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
