"""The last known answer of a slow check (a Celery broadcast), kept in Django's cache and refreshed in the background.

A page never waits for a check: :func:`recent` returns the newest cached
answer whatever its age (its ``checked_at`` says when it was made, and the
page shows it), starts one background refresh when it is older than
``max_age_s``, and, before any answer exists, returns the caller's
placeholder (what is known without asking: the heartbeats) while the first
check runs. One refresh runs at a time per key (a ``cache.add`` claim).

The answers are dataclasses with a ``checked_at`` field (Unix time, seconds).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from django.core.cache import cache

__all__ = ["recent"]

log = logging.getLogger("dashboard.fleet")

T = TypeVar("T")

#: A cached answer is dropped after this many times its maximum age (then the placeholder shows again).
KEEP_FACTOR = 60
_refresher = ThreadPoolExecutor(max_workers=2, thread_name_prefix="live-state")


def _refresh(key: str, check: Callable[[], Any], max_age_s: float) -> Any:
    try:
        result = check()
        if getattr(result, "checked_at", 0) == 0:
            result = replace(result, checked_at=time.time())
        cache.set(key, result, timeout=max(max_age_s * KEEP_FACTOR, 60))
        return result
    except Exception:  # a check that raises must not kill the refresher; the page keeps the last answer
        log.exception("background refresh of %s failed", key)
        return None
    finally:
        cache.delete(f"{key}:refreshing")


def recent(key: str, check: Callable[[], T], max_age_s: float, placeholder: Callable[[], T], *,
           background: bool = True) -> T:
    """The newest cached answer of ``check`` under ``key``, never waiting for a new one (unless told).

    Args:
        key: the cache key of the answer.
        check: makes a new answer (slow: a broadcast that waits its timeout).
        max_age_s: seconds an answer stays fresh; an older one is returned and refreshed in the background.
            0 or less: ``check()`` on every call.
        placeholder: the answer to show while the first check runs (nothing cached yet).
        background: refresh in a background thread (default) or in this call (then a first answer is waited for).

    Returns:
        A copy of the cached answer, the placeholder, or (``background=False`` with nothing cached) the new answer.
    """
    if max_age_s <= 0:
        return check()
    cached = cache.get(key)
    stale = cached is None or time.time() - cached.checked_at >= max_age_s
    if stale and cache.add(f"{key}:refreshing", 1, timeout=60):
        if background:
            _refresher.submit(_refresh, key, check, max_age_s)
        else:
            fresh = _refresh(key, check, max_age_s)
            if cached is None and fresh is not None:
                return fresh
    if cached is None:
        return placeholder()
    return replace(cached)
