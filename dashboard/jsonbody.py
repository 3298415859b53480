"""JSON request bodies: bounded, sent as JSON, and checked field by field against a schema.

Every JSON ``POST`` of the API reads its body through :func:`json_body`, so
a body sent with another content type is refused with a 415, and an oversized
or deeply nested body with a 400 naming the bound, before anything is parsed
into a form or stored. :func:`validate_body` then checks every field of the
parsed object against the body's pydantic schema (strict types: ``"5"`` is no
number, ``["a"]`` no string; ranges; and :data:`Text`'s character set: no NUL,
no lone surrogate, no control character), answering 400 with each bad field
named by its path (``filter.q``, ``thread_ids.3``, ``versions.<key>``).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import pydantic
from django.conf import settings
from django.http import HttpRequest

from dashboard.errors import ErrorView

__all__ = ["JSON_CONTENT_TYPE", "MAX_DEPTH", "MAX_STORED_INT", "BodyRefused", "Flag", "TEXT", "Text",
           "json_body", "max_body_bytes", "strict_model_config", "validate_body"]

#: The content type every JSON body must be sent with (a charset parameter is allowed).
JSON_CONTENT_TYPE = "application/json"
#: The largest integer either store holds in an integer column (signed 64-bit).
MAX_STORED_INT = 2**63 - 1

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
        BodyRefused: 415 ``unsupported_media_type`` (a ``Content-Type`` other than
            :data:`JSON_CONTENT_TYPE`), 400 ``body_too_large`` (more than :func:`max_body_bytes`, by
            ``Content-Length`` or by the bytes read) or ``json_too_deep`` (more than
            :data:`MAX_DEPTH` levels).
        UnicodeDecodeError, json.JSONDecodeError: the body is not UTF-8 JSON.
    """
    if request.content_type != JSON_CONTENT_TYPE:
        sent = request.content_type or "no Content-Type"
        raise BodyRefused(ErrorView(415, "unsupported_media_type",
                                    f"The body is sent as {sent}; this route reads JSON only.",
                                    f"Send the body as JSON with the header Content-Type: {JSON_CONTENT_TYPE}."))
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


def _check_text(value: str) -> str:
    """``value`` if every character can be stored and shown; else ``ValueError`` naming the first bad one."""
    for position, char in enumerate(value):
        if char == "\x00":
            raise ValueError(f"contains a NUL byte (\\x00) at character {position}, which no stored value can hold")
        if "\ud800" <= char <= "\udfff":
            raise ValueError(f"contains a lone surrogate ({ascii(char)}) at character {position}, which is not "
                             "text (UTF-8 cannot encode it)")
        if unicodedata.category(char) == "Cc":
            raise ValueError(f"contains the control character {ascii(char)} at character {position}")
    return value


#: The character-set check of every string of a body (used as ``Annotated[str, StringConstraints(...), TEXT]``).
TEXT = pydantic.AfterValidator(_check_text)
#: A JSON string that is text: no NUL byte, no lone surrogate (``"\\ud800"``), no control character.
Text = Annotated[str, TEXT]


def _json_boolean(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false (a JSON boolean), not {value!r}")
    return value


#: A JSON ``true`` or ``false``; ``"yes"``, ``"false"`` or ``1`` are refused instead of being taken for one.
Flag = Annotated[bool, pydantic.BeforeValidator(_json_boolean)]


def strict_model_config() -> pydantic.ConfigDict:
    """The configuration of every body schema: strict types, unknown fields refused, no NaN or infinity."""
    return pydantic.ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


def _path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if part not in ("[key]",)) or "body"


def _problem(error: Mapping[str, Any]) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "is not a field of this body"
    return f"{ascii(_path(error['loc']))[1:-1]}: {message}"


def validate_body(schema: type[pydantic.BaseModel], body: dict[str, Any], *, what: str, hint: str,
                  code_for: Callable[[str], str] = lambda field: "invalid_parameters") -> pydantic.BaseModel:
    """``body`` checked against ``schema`` (a model configured with :func:`strict_model_config`).

    Args:
        schema: the body's pydantic model.
        body: the parsed JSON object.
        what: what the body is, for the detail (``"Invalid <what>: <field>: <message>; ..."``).
        hint: what the caller should send.
        code_for: the error code for a top-level field name (the first bad field decides the code).

    Returns:
        The validated model.

    Raises:
        BodyRefused: 400, naming every bad field by its path (non-ASCII characters escaped).
    """
    try:
        return schema.model_validate(body)
    except pydantic.ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        first = str(errors[0]["loc"][0]) if errors and errors[0]["loc"] else ""
        raise BodyRefused(ErrorView(400, code_for(first),
                                    f"Invalid {what}: {'; '.join(_problem(e) for e in errors)}", hint)) from None
