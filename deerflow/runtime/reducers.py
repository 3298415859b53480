"""DeerFlow's reducers for the thread state's non-message channels (spec section "State schemas").

Each is a LangGraph binary reducer ``(existing, new) -> merged`` attached to its
channel by :class:`deerflow.runtime.state_schemas.ThreadState`
(DeerFlow's ``deerflow.agents.thread_state.ThreadState``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["merge_artifacts", "merge_goal", "merge_list_unique", "merge_promoted", "merge_sandbox",
           "merge_todos", "merge_viewed_images"]


def merge_artifacts(existing: list[str] | None, new: list[str] | None) -> list[str]:
    """Reducer for ``artifacts``: append paths, keep first occurrence order, no duplicates."""
    return list(dict.fromkeys([*(existing or []), *(new or [])]))


def merge_list_unique(existing: list[Any] | None, new: list[Any] | None) -> list[Any]:
    """Reducer for ``delegations`` and ``skill_context``: append items not already present."""
    out = list(existing or [])
    for item in new or []:
        if item not in out:
            out.append(item)
    return out


def merge_viewed_images(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for ``viewed_images``: merge by path; an empty dict write clears the channel."""
    if new is not None and len(new) == 0:
        return {}
    return {**(existing or {}), **(new or {})}


def merge_sandbox(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """Reducer for ``sandbox`` (``{"sandbox_id": ...}``): idempotent writes only.

    Returns ``existing`` for a ``None`` write or the same ``sandbox_id``, and
    ``new`` when nothing was set yet.

    Raises:
        ValueError: two different sandbox ids for one thread.
    """
    if new is None:
        return existing
    if existing is None:
        return new
    if existing.get("sandbox_id") == new.get("sandbox_id"):
        return existing
    raise ValueError(
        f"Conflicting sandbox state updates: {existing.get('sandbox_id')!r} != {new.get('sandbox_id')!r}"
    )


def merge_todos(existing: list[Any] | None, new: list[Any] | None) -> list[Any] | None:
    """Reducer for ``todos``: the last non-``None`` write wins (``[]`` is an explicit clear)."""
    return existing if new is None else new


def merge_goal(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """Reducer for ``goal``: the last non-``None`` write wins."""
    return existing if new is None else new


def merge_promoted(existing: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """Reducer for ``promoted`` (``{"catalog_hash": str, "names": [str]}``).

    An empty or ``None`` write keeps ``existing``; a write for another
    ``catalog_hash`` replaces the value; the same hash unions ``names``
    (first occurrence order, no duplicates).
    """
    if not new:
        return existing
    if existing is None or existing.get("catalog_hash") != new.get("catalog_hash"):
        names = new.get("names") or []
    else:
        names = [*(existing.get("names") or []), *(new.get("names") or [])]
    return {"catalog_hash": new.get("catalog_hash"), "names": list(dict.fromkeys(names))}
