"""Is there a live worker that can run conversions? (a delta-mode worker consuming ``checkpoints.delta``)

Asked over Celery's broadcast channel (``inspect().active_queues()``) with a
short timeout. Three answers: ``ok`` (these workers consume the queue),
``none`` (workers answered, none consumes it, or nobody answered on a broker
that always delivers broadcasts), ``unknown`` (the broker cannot be reached,
or it is the filesystem broker, whose broadcasts are best effort: a silent
broker is not proof that no worker runs). Never raises.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from dashboard.jobs.errors import DELTA_WORKER_COMMAND
from dashboard.jobs.tasks import THREAD_QUEUE

__all__ = ["WorkerCheck", "check_delta_workers"]

log = logging.getLogger("dashboard.jobs")

START_HINT = (f"Start one with `{DELTA_WORKER_COMMAND}` in an environment whose config.yaml (DEER_FLOW_CONFIG_PATH) "
              "sets database.checkpoint_channel_mode: delta; it freezes delta mode at start-up and also consumes "
              f"{THREAD_QUEUE}. The job stays queued until one does.")


@dataclass(frozen=True)
class WorkerCheck:
    """The answer: ``state`` (``ok``/``none``/``unknown``), the delta workers seen, and what to tell the operator."""

    state: str
    workers: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    detail: str = ""
    hint: str = ""


def check_delta_workers(timeout: float = 1.0, app=None) -> WorkerCheck:
    """Ask the workers which queues they consume (waits up to ``timeout`` seconds)."""
    if app is None:
        from dashboard.celery import app
    try:
        replies = app.control.inspect(timeout=timeout).active_queues() or {}
        filesystem = app.connection_for_read().transport.driver_type == "filesystem"
    except Exception as exc:  # broker down, DNS, auth: say so, never crash a page
        log.warning("worker check failed: %s", exc)
        return WorkerCheck("unknown", detail=f"Cannot reach the Celery broker to ask the workers: {exc}",
                           hint="Check CELERY_BROKER_URL; the job stays queued until a delta worker picks it up.")
    delta = sorted(n for n, queues in replies.items() if any(q.get("name") == THREAD_QUEUE for q in queues or []))
    others = sorted(set(replies) - set(delta))
    if delta:
        return WorkerCheck("ok", delta, others, detail=f"Live worker(s) consuming {THREAD_QUEUE}: {', '.join(delta)}.")
    if not replies and filesystem:
        return WorkerCheck("unknown", detail="No worker answered. The filesystem broker cannot confirm whether a "
                           "delta-mode worker is running.", hint=START_HINT)
    seen = f" Workers answering ({', '.join(others)}) do not consume {THREAD_QUEUE} (full-mode workers)." if others else ""
    return WorkerCheck("none", [], others, detail=f"No live worker can run this job.{seen}", hint=START_HINT)
