"""Cheap aggregates of the thread summary for monitoring: replay depths and how stale the summary is.

Both read our own tables only (``dfa_thread_summary``, one row per thread, and
``dfa_summary_state``), never ``checkpoints``: cheap enough for every
Prometheus scrape. A summary that was never built (or that this role may not
read) answers empty values; callers say so rather than scan.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any

from deerflow.inventory.summary import schema as summary_schema
from deerflow.storage.sqlread import reader_for

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["QUANTILES", "depth_quantiles", "replay_depth_counts", "summary_age_seconds"]

#: The quantiles :func:`depth_quantiles` reports (1.0 is the deepest thread).
QUANTILES = (0.5, 0.9, 0.99, 1.0)


def replay_depth_counts(saver: BaseCheckpointSaver[Any]) -> dict[int, int]:
    """``{replay depth: delta threads at that depth}`` from the summary (depth: updates since the head's last
    ``_DeltaSnapshot``; at most the cadence, so the answer has a few keys). ``{}`` when the summary cannot be
    read or holds no delta thread with a known depth."""
    if summary_schema.access(saver) == "none":
        return {}
    rows = reader_for(saver).query(
        "SELECT replay_depth AS depth, COUNT(*) AS n FROM dfa_thread_summary "
        "WHERE mode = 'delta' AND replay_depth IS NOT NULL GROUP BY replay_depth")
    return {int(r["depth"]): int(r["n"]) for r in rows}


def depth_quantiles(counts: dict[int, int], quantiles: tuple[float, ...] = QUANTILES) -> dict[float, int]:
    """The nearest-rank quantiles of the distribution ``counts`` (``{value: how many}``): the smallest value
    with at least ``ceil(q * total)`` observations at or below it. ``{}`` for an empty distribution.

    Raises:
        ValueError: a quantile outside (0, 1].
    """
    if any(not 0 < q <= 1 for q in quantiles):
        raise ValueError(f"quantiles must be in (0, 1]; got {quantiles}")
    total = sum(counts.values())
    if not total:
        return {}
    out: dict[float, int] = {}
    ordered = sorted(counts.items())
    for q in quantiles:
        rank, seen = max(1, math.ceil(q * total)), 0
        for value, n in ordered:
            seen += n
            if seen >= rank:
                out[q] = value
                break
    return out


def summary_age_seconds(saver: BaseCheckpointSaver[Any], now: dt.datetime | None = None) -> float | None:
    """Seconds since the summary was last refreshed (``refreshed_at``), or ``None`` when it never was or this
    role cannot read it. A large value means the periodic refresh (``threads.refresh_summary``) is not running."""
    if summary_schema.access(saver) == "none":
        return None
    rows = reader_for(saver).query("SELECT refreshed_at FROM dfa_summary_state WHERE id = 1")
    if not rows or not rows[0]["refreshed_at"]:
        return None
    at = dt.datetime.fromisoformat(str(rows[0]["refreshed_at"]))
    at = at if at.tzinfo else at.replace(tzinfo=dt.UTC)
    return max(((now or dt.datetime.now(dt.UTC)) - at).total_seconds(), 0.0)
