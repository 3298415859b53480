"""Turn materialized channel values into JSON values for the API.

Messages become ``message.model_dump()`` dicts (the JSON API's contract, docs/api.md);
other values pass through when JSON-native, pydantic models are dumped,
and anything else (an ``Overwrite`` wrapper, bytes, a custom object left by
middleware) is shown as ``{"__repr__": "..."}`` rather than dropped.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

__all__ = ["jsonable", "state_json", "state_values_json"]


def jsonable(value: Any) -> Any:
    """A JSON-serializable copy of ``value`` (see the module docstring for the rules)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump())
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return {"__bytes_base64__": base64.b64encode(value).decode("ascii")}
    return {"__repr__": repr(value)}


def state_values_json(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with ``messages`` as a list of ``model_dump()`` dicts and every channel JSON-safe."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key == "messages" and isinstance(value, list):
            out[key] = [jsonable(m.model_dump()) if isinstance(m, BaseMessage) else jsonable(m) for m in value]
        else:
            out[key] = jsonable(value)
    return out


def state_json(view: Any) -> dict[str, Any]:
    """The ``/api/threads/<id>/state`` body for a :class:`dashboard.threads.services.StateView`.

    ``{"thread_id", "checkpoint_id", "checkpoint_ns", "parent_checkpoint_id", "created_at",
    "metadata", "values", "next", "findings"}`` (``findings``: where our replay and LangGraph's
    reader disagree, or a stored value was unwrapped); the thread page's JSON view and download send the same.
    """
    return {
        "thread_id": view.thread_id,
        "checkpoint_id": view.checkpoint_id,
        "checkpoint_ns": view.checkpoint_ns,
        "parent_checkpoint_id": view.parent_checkpoint_id,
        "created_at": view.created_at,
        "metadata": jsonable(view.metadata),
        "values": state_values_json(view.values),
        "next": list(view.next),
        "findings": list(view.findings),
    }
