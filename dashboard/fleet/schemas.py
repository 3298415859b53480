"""The ``POST /api/processes/heartbeat`` body, field by field: its pydantic schema and the check the API calls.

:func:`check_heartbeat_body` runs on the parsed JSON object before the
heartbeat form sees it: strict JSON types (``host: ["a"]`` is no string,
``pid: "12"`` no number), the bounds of :mod:`dashboard.fleet.forms`, and
for every string, ``versions``' keys included, the character set of
:data:`dashboard.jsonbody.Text`. A bad body is answered 400
``invalid_parameters`` naming each bad field; nothing is registered.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic
from pydantic import Field, StringConstraints

from dashboard.fleet.forms import MAX_COUNT, MAX_PID, MAX_VERSION_TEXT, MAX_VERSIONS
from dashboard.jsonbody import TEXT, strict_model_config, validate_body

__all__ = ["HEARTBEAT_HINT", "HeartbeatBody", "check_heartbeat_body"]

#: What a heartbeat body holds (said with every 400).
HEARTBEAT_HINT = "See the heartbeat snippet in docs/operations.md (Fleet audit) for the fields."

_VersionText = Annotated[str, StringConstraints(max_length=MAX_VERSION_TEXT), TEXT]


def _few_versions(value: Any) -> Any:
    """Refuse a ``versions`` object with more than :data:`MAX_VERSIONS` entries before reading any of them."""
    if isinstance(value, dict) and len(value) > MAX_VERSIONS:
        raise ValueError(f"has {len(value):,} entries; send at most {MAX_VERSIONS} (the packages that matter: "
                         "langgraph, langgraph-checkpoint, deerflow, ...)")
    return value


class HistoryCache(pydantic.BaseModel):
    """``checkpoint_cache``: the process's history cache setting, without credentials."""

    model_config = strict_model_config()

    type: Literal["memory", "redis", "disabled"]
    max_entries: Annotated[int, Field(ge=0, le=10**12)] | None = None
    ttl_seconds: Annotated[int, Field(ge=0, le=10**12)] | None = None
    key_prefix: Annotated[str, StringConstraints(max_length=255), TEXT] | None = None
    redis: Annotated[str, StringConstraints(max_length=255), TEXT] | None = None


class HeartbeatBody(pydantic.BaseModel):
    """The facts an outside DeerFlow process reports about itself (docs/operations.md, Fleet audit)."""

    model_config = strict_model_config()

    instance_id: Annotated[str, StringConstraints(min_length=1, max_length=64), TEXT]
    """Stable per process start, e.g. a uuid4 hex."""
    name: Annotated[str, StringConstraints(max_length=255), TEXT] | None = None
    host: Annotated[str, StringConstraints(min_length=1, max_length=255), TEXT]
    pid: Annotated[int, Field(ge=0, le=MAX_PID)]
    mode: Literal["full", "delta"]
    snapshot_frequency: Annotated[int, Field(ge=1, le=MAX_COUNT)]
    config_path: Annotated[str, StringConstraints(max_length=1024), TEXT] | None = None
    config_sha256: Annotated[str, StringConstraints(pattern=r"^([0-9a-f]{64})?$"), TEXT] | None = None
    max_supersteps: Annotated[int, Field(ge=1, le=MAX_COUNT)] | None = None
    versions: Annotated[dict[_VersionText, _VersionText], pydantic.BeforeValidator(_few_versions)] | None = None
    """``{package: version}``, e.g. ``{"langgraph": "1.2.9"}``."""
    heartbeat_interval_s: Annotated[float, Field(ge=1, le=3600)] | None = None
    checkpoint_cache: HistoryCache | None = None
    """DeerFlow's ``database.checkpoint_cache`` as the process runs it (the heartbeat form checks its values)."""


def check_heartbeat_body(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (the parsed JSON object of a heartbeat) once every field is what :class:`HeartbeatBody` says.

    Returns:
        ``body`` itself (validation is strict, so nothing was coerced).

    Raises:
        dashboard.jsonbody.BodyRefused: 400 ``invalid_parameters`` naming every bad field.
    """
    validate_body(HeartbeatBody, body, what="heartbeat", hint=HEARTBEAT_HINT)
    return body
