"""Live check: a narrow Celery remote-control command of our own.

``deerflow_facts`` answers with exactly the facts the registry stores (see
:func:`dashboard.fleet.facts.process_facts`), unlike ``inspect conf``, which
would leak every setting. :func:`live_check` broadcasts it and collects the
replies; a broker that cannot broadcast is reported, not raised.

The broadcast waits its whole timeout (1 s) for replies, which would hold
every refresh of the audit page; the page reads :func:`recent_live_check`
instead: the newest check this process made, refreshed in the background
once it is older than ``DASHBOARD_LIVE_CHECK_MAX_AGE_S``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from django.core.cache import cache

from dashboard.fleet.control_command import deerflow_facts

log = logging.getLogger("dashboard.fleet")

__all__ = ["LIVE_CHECK_KEY", "LiveCheck", "deerflow_facts", "live_check", "recent_live_check"]

#: Cache keys of the newest live check and of the refresh under way (so one refresh runs at a time).
LIVE_CHECK_KEY, _REFRESHING_KEY = "fleet:live_check", "fleet:live_check:refreshing"
#: A cached check older than this many times its maximum age is not shown at all (the next page waits for a new one).
_STALE_LIMIT = 10
_refresher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="live-check")


@dataclass
class LiveCheck:
    """Replies to one broadcast.

    Attributes:
        supported: False when the broker cannot broadcast (then ``error`` says why).
        replies: ``{worker node name: facts}``.
        error: why the check could not run, or ``None``.
        timeout_s: how long replies were awaited (seconds).
        checked_at: when the broadcast was sent (Unix time, seconds; 0 when not recorded); not compared.
    """

    supported: bool
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    timeout_s: float = 1.0
    checked_at: float = field(default=0.0, compare=False)


def live_check(app=None, timeout_s: float = 1.0) -> LiveCheck:
    """Ask every live worker for its facts now.

    The broker connection is tried once (with one quick retry) before the
    broadcast, so an unreachable broker is reported in well under a second
    instead of holding the audit page through kombu's default retries.
    """
    if app is None:
        from dashboard.celery import app
    started = time.time()
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2, interval_max=0.2)
            replies = app.control.broadcast("deerflow_facts", reply=True, timeout=timeout_s, connection=conn) or []
    except NotImplementedError as exc:
        return LiveCheck(False, error=f"this broker cannot broadcast ({exc}); relying on heartbeats",
                         timeout_s=timeout_s, checked_at=started)
    except Exception as exc:  # broker down: report, do not break the audit page
        log.warning("live check failed: %s", exc)
        return LiveCheck(False, error=f"broker unreachable: {exc}", timeout_s=timeout_s, checked_at=started)
    merged: dict[str, dict[str, Any]] = {}
    for reply in replies:
        for node, facts in reply.items():
            if isinstance(facts, dict) and "error" not in facts:
                merged[node] = facts
    return LiveCheck(True, merged, timeout_s=timeout_s, checked_at=started)


def _refresh(check: Callable[[], LiveCheck], max_age_s: float) -> LiveCheck:
    try:
        result = check()
        cache.set(LIVE_CHECK_KEY, result, timeout=max_age_s * _STALE_LIMIT)
        return result
    finally:
        cache.delete(_REFRESHING_KEY)


def recent_live_check(max_age_s: float, check: Callable[[], LiveCheck] = live_check, *,
                      background: bool = True) -> LiveCheck:
    """The newest live check of this process (Django's cache), for pages that refresh every few seconds.

    No check cached (the first page, or the last one is over ``10 * max_age_s`` seconds old): ``check()`` runs
    now and the page waits for it (about 1 s). One younger than ``max_age_s`` seconds: returned as it is. One
    in between: returned, and one refresh is started in a background thread (or run now when ``background``
    is false), so the next page shows the new one. Its :attr:`LiveCheck.checked_at` says when it was made.

    Args:
        max_age_s: seconds a check stays fresh (``DASHBOARD_LIVE_CHECK_MAX_AGE_S``; 0 checks on every call).
        check: what makes a new check (default :func:`live_check`).
        background: refresh a stale check in a background thread (default) or in this call.
    """
    if max_age_s <= 0:
        return check()
    cached = cache.get(LIVE_CHECK_KEY)
    if cached is None:
        if cache.add(_REFRESHING_KEY, 1, timeout=60):
            return _refresh(check, max_age_s)
        return check()  # another request is making the first one: do not wait for its result, make ours
    if time.time() - cached.checked_at >= max_age_s and cache.add(_REFRESHING_KEY, 1, timeout=60):
        if background:
            _refresher.submit(_refresh, check, max_age_s)
        else:
            _refresh(check, max_age_s)
    return replace(cached)
