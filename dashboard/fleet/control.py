"""Live check: a narrow Celery remote-control command of our own.

``deerflow_facts`` answers with exactly the facts the registry stores (see
:func:`dashboard.fleet.facts.process_facts`), unlike ``inspect conf``, which
would leak every setting. :func:`live_check` broadcasts it and collects the
replies; a broker that cannot broadcast is reported, not raised.

The broadcast waits its whole timeout (1 s) for replies, which would hold
every page that shows it; pages (the audit page, ``GET /api/audit``,
``/metrics``) read :func:`recent_live_check` instead: the newest check,
refreshed in the background once it is older than
``DASHBOARD_LIVE_CHECK_MAX_AGE_S``, never waited for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dashboard.fleet.control_command import deerflow_facts
from dashboard.fleet.recent import recent

log = logging.getLogger("dashboard.fleet")

__all__ = ["LIVE_CHECK_KEY", "PENDING", "LiveCheck", "deerflow_facts", "live_check", "recent_live_check"]

#: Cache key of the newest live check (:mod:`dashboard.fleet.recent`).
LIVE_CHECK_KEY = "fleet:live_check"


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


#: What a page shows before the first live check of this deployment answered (it runs in the background).
PENDING = ("no live check has answered yet (the first one is running in the background); "
           "these figures are from heartbeats until it does")


def recent_live_check(max_age_s: float, check: Callable[[], LiveCheck] = live_check, *,
                      background: bool = True) -> LiveCheck:
    """The newest live check (Django's cache), for pages: never waits for a broadcast.

    A check younger than ``max_age_s`` seconds is returned as it is; an older one is returned and one refresh
    is started in a background thread (or run now when ``background`` is false), so the next page shows the new
    one. Before any check exists, a :data:`PENDING` answer (``supported=False``, ``checked_at=0``) is returned and
    the first check runs in the background. :attr:`LiveCheck.checked_at` says when the answer was made.

    Args:
        max_age_s: seconds a check stays fresh (``DASHBOARD_LIVE_CHECK_MAX_AGE_S``; 0 checks on every call).
        check: what makes a new check (default :func:`live_check`).
        background: refresh in a background thread (default) or in this call (a first check is then waited for).
    """
    return recent(LIVE_CHECK_KEY, check, max_age_s, lambda: LiveCheck(False, error=PENDING), background=background)
