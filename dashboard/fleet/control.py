"""Live check: a narrow Celery remote-control command of our own.

``deerflow_facts`` answers with exactly the facts the registry stores (see
:func:`dashboard.fleet.facts.process_facts`), unlike ``inspect conf``, which
would leak every setting. :func:`live_check` broadcasts it and collects the
replies; a broker that cannot broadcast is reported, not raised.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from celery.worker.control import control_command

log = logging.getLogger("dashboard.fleet")

__all__ = ["LiveCheck", "deerflow_facts", "live_check"]


@control_command()
def deerflow_facts(state) -> dict[str, Any]:
    """Remote-control command: this worker's frozen mode, cadence, config and versions."""
    from dashboard.fleet.facts import process_facts
    from dashboard.runtime import get_runtime

    queues = [q.name for q in state.consumer.task_consumer.queues] if state.consumer.task_consumer else []
    facts = process_facts(get_runtime(), role="worker", queues=queues)
    facts["instance_id"] = getattr(state.consumer.app, "deerflow_instance_id", "")
    return facts


@dataclass
class LiveCheck:
    """Replies to one broadcast.

    Attributes:
        supported: False when the broker cannot broadcast (then ``error`` says why).
        replies: ``{worker node name: facts}``.
        error: why the check could not run, or ``None``.
        timeout_s: how long replies were awaited (seconds).
    """

    supported: bool
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    timeout_s: float = 1.0


def live_check(app=None, timeout_s: float = 1.0) -> LiveCheck:
    """Ask every live worker for its facts now.

    The broker connection is tried once (with one quick retry) before the
    broadcast, so an unreachable broker is reported in well under a second
    instead of holding the audit page through kombu's default retries.
    """
    if app is None:
        from dashboard.celery import app
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2, interval_max=0.2)
            replies = app.control.broadcast("deerflow_facts", reply=True, timeout=timeout_s, connection=conn) or []
    except NotImplementedError as exc:
        return LiveCheck(False, error=f"this broker cannot broadcast ({exc}); relying on heartbeats",
                         timeout_s=timeout_s)
    except Exception as exc:  # broker down: report, do not break the audit page
        log.warning("live check failed: %s", exc)
        return LiveCheck(False, error=f"broker unreachable: {exc}", timeout_s=timeout_s)
    merged: dict[str, dict[str, Any]] = {}
    for reply in replies:
        for node, facts in reply.items():
            if isinstance(facts, dict) and "error" not in facts:
                merged[node] = facts
    return LiveCheck(True, merged, timeout_s=timeout_s)
