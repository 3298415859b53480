"""Template helpers for rendering messages. Everything they return is escaped by the template engine."""

from __future__ import annotations

import json
from typing import Any

from django import template

from dashboard.threads import links
from dashboard.threads.jsonify import jsonable

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """``value`` as indented JSON text (to be auto-escaped by the template)."""
    return json.dumps(jsonable(value), indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def content_parts(content: Any) -> list[dict[str, str]]:
    """A message's content as ``[{"kind": "text"|"block", "text": ...}]`` for display."""
    if isinstance(content, str):
        return [{"kind": "text", "text": content}]
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append({"kind": "text", "text": block["text"]})
        else:
            parts.append({"kind": "block", "text": pretty_json(block)})
    return parts


@register.filter
def role(message: Any) -> str:
    """``human``, ``ai``, ``tool``, ``system`` or the message's type."""
    return getattr(message, "type", "unknown")


@register.filter
def short_id(value: str | None) -> str:
    """The last 12 characters of an id, for compact tables."""
    if not value:
        return ""
    return value if len(value) <= 14 else "…" + value[-12:]


@register.simple_tag
def thread_url(name: str, thread_id: str, **query: str | None) -> str:
    """``{% thread_url "threads:detail" thread_id checkpoint_id=... %}``: see :mod:`dashboard.threads.links`."""
    return links.thread_url(name, thread_id, **query)
