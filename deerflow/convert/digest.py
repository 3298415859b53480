"""Canonical message and channel digests (the fixture manifest's definition).

A message becomes ``{type, id, name, content, tool_call_id, tool_calls}``
(tool calls reduced to ``{name, args, id}``); the list is serialized with
``json.dumps(sort_keys=True, ensure_ascii=False, separators=(',', ':'))``,
encoded as UTF-8 and hashed with SHA-256 (lowercase hex). An empty or absent
channel is ``[]``. ``channels_sha256`` is the same over ``{channel: value}``
for every channel other than ``messages``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["EMPTY_MESSAGES_SHA256", "canonical_messages", "channels_sha256", "messages_sha256"]


def canonical_messages(messages: Iterable[Any] | None) -> list[dict[str, Any]]:
    """The canonical JSON-able form of each message, in order."""
    return [
        {
            "type": m.type,
            "id": m.id,
            "name": m.name,
            "content": m.content,
            "tool_call_id": getattr(m, "tool_call_id", None),
            "tool_calls": [
                {"name": c["name"], "args": c["args"], "id": c["id"]}
                for c in (getattr(m, "tool_calls", None) or [])
            ],
        }
        for m in (messages or [])
    ]


def _sha256_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def messages_sha256(messages: Iterable[Any] | None) -> str:
    """SHA-256 hex of the canonical message list."""
    return _sha256_json(canonical_messages(messages))


def channels_sha256(values: Mapping[str, Any]) -> str:
    """SHA-256 hex of every channel in ``values`` except ``messages``."""
    return _sha256_json({k: v for k, v in values.items() if k != "messages"})


EMPTY_MESSAGES_SHA256 = messages_sha256([])
