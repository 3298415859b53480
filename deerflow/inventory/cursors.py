"""Keyset pagination cursors of the thread list: unsigned base64url JSON, checked before they reach SQL.

A cursor names the row after which the next page starts: ``[last_checkpoint_id, thread_id]``
for the default sort, ``[sort, key, thread_id]`` for the others (:data:`SORTS`). Every
value is checked to be bindable by both backends (no NUL, valid UTF-8, signed 64-bit ints).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from deerflow.errors import DeerFlowError

__all__ = ["CURSOR_INT_MAX", "CURSOR_INT_MIN", "InvalidCursorError", "SORTS", "decode_cursor", "encode_cursor",
           "keyset_cursor", "keyset_position"]

#: ``sort`` values of :func:`list_threads` and the summary column each orders by (descending).
SORTS = {"updated": "last_checkpoint_id", "checkpoints": "checkpoint_count", "bytes": "bytes_total"}


class InvalidCursorError(DeerFlowError, ValueError):
    """A malformed pagination cursor, one made for another sort, or one holding values no database can bind.

    Cursors are unsigned base64url JSON: a made-up cursor of the right shape is
    accepted and only decides where the page starts. Drop the cursor to start
    from the first page.
    """



#: Bounds of a numeric cursor key: both backends keep the sort keys as signed 64-bit integers
#: (SQLite INTEGER, Postgres bigint) and refuse to bind a number outside them.
CURSOR_INT_MIN, CURSOR_INT_MAX = -(2**63), 2**63 - 1
_NOT_VALID = "cursor is not valid; start again without a cursor"


def _encode(value: list[Any]) -> str:
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def encode_cursor(last_checkpoint_id: str, thread_id: str) -> str:
    """An opaque keyset cursor (default sort) for the row after which the next page starts."""
    return _encode([last_checkpoint_id, thread_id])


def _decode(cursor: str) -> Any:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8"))
    # RecursionError: deeply nested JSON ("[[[[..."), which the decoder refuses by recursion depth.
    except (ValueError, UnicodeError, binascii.Error, RecursionError) as exc:
        raise InvalidCursorError(_NOT_VALID) from exc


def _bindable_text(value: Any) -> bool:
    """A string both backends accept as a parameter: no NUL (Postgres text) and valid UTF-8 (no lone surrogate)."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _bindable_int(value: Any) -> bool:
    """An integer (not a bool or float) within :data:`CURSOR_INT_MIN`..:data:`CURSOR_INT_MAX`."""
    return type(value) is int and CURSOR_INT_MIN <= value <= CURSOR_INT_MAX


def decode_cursor(cursor: str) -> tuple[str, str]:
    """Inverse of :func:`encode_cursor`.

    Cursors are unsigned: any ``[string, string]`` of bindable text is a
    position (it only decides where the page starts); only a malformed one
    is refused.

    Raises:
        InvalidCursorError: ``cursor`` is not ``[last_checkpoint_id, thread_id]`` as this module produces.
    """
    value = _decode(cursor)
    if not (isinstance(value, list) and len(value) == 2 and all(_bindable_text(v) for v in value)):
        raise InvalidCursorError(_NOT_VALID)
    return value[0], value[1]


def keyset_cursor(sort: str, key: Any, thread_id: str) -> str:
    """The cursor for ``sort`` of the row with sort ``key`` and ``thread_id`` (the last row of a page)."""
    return encode_cursor(key or "", thread_id) if sort == "updated" else _encode([sort, int(key), thread_id])


def _made_for(value: Any) -> str | None:
    """The sort a decoded cursor was shaped for (``[id, thread]`` or ``[sort, key, thread]``), else ``None``."""
    if isinstance(value, list) and len(value) == 2:
        return "updated"
    if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str) and value[0] in SORTS:
        return value[0] if value[0] != "updated" else None
    return None


def keyset_position(sort: str, cursor: str) -> tuple[Any, str]:
    """``(sort key, thread_id)`` of a cursor for ``sort``, every value checked before it reaches SQL.

    Raises:
        InvalidCursorError: malformed, made for another sort, or holding a value the database
            cannot bind (a number outside signed 64 bits, a non-integer key, text with NUL or a
            lone surrogate).
    """
    value = _decode(cursor)
    made_for = _made_for(value)
    if made_for is None:
        raise InvalidCursorError(_NOT_VALID)
    if made_for != sort:
        raise InvalidCursorError(f"cursor does not belong to sort={sort}; start again without a cursor")
    if sort == "updated":
        return decode_cursor(cursor)
    if not (_bindable_int(value[1]) and _bindable_text(value[2])):
        raise InvalidCursorError(_NOT_VALID)
    return value[1], value[2]
