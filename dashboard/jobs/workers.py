"""Is there a live worker that can run jobs? (a worker consuming ``checkpoints.delta``)

Every dashboard worker is a maintenance process: it freezes delta mode at the
fleet's cadence whatever ``checkpoint_channel_mode`` its config.yaml names
(:mod:`dashboard.celery`), so any worker started with :data:`DELTA_WORKER_COMMAND`
runs every kind of job, in a full-mode fleet too.

Two ways to ask. :func:`registry_check` reads the fleet registry's worker
heartbeats (one query, cheap enough for the job page's 2 s poll);
:func:`job_runnability` uses it to say, on a waiting job's page, that no live
worker can run it and why. :func:`check_delta_workers` asks the workers
themselves: asked over Celery's broadcast channel (``inspect().active_queues()``) with a
short timeout. Three answers: ``ok`` (these workers consume the queue),
``none`` (workers answered, none consumes it, or nobody answered on a broker
that always delivers broadcasts), ``unknown`` (the broker cannot be reached,
or it is the filesystem broker, whose broadcasts are best effort: a silent
broker is not proof that no worker runs). Never raises. Pages read
:func:`recent_worker_check`, its newest answer, refreshed in the background.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from dashboard.celery import THREAD_QUEUE
from dashboard.errors.jobs import DELTA_WORKER_COMMAND
from dashboard.fleet.processes import process_rows
from dashboard.fleet.recent import recent
from dashboard.formatting import plural

__all__ = [
    "WORKER_CHECK_KEY",
    "WorkerCheck",
    "check_delta_workers",
    "job_runnability",
    "recent_worker_check",
    "registry_check",
]

log = logging.getLogger("dashboard.jobs")

START_HINT = (f"Start a worker: `{DELTA_WORKER_COMMAND}`, with the same config.yaml (DEER_FLOW_CONFIG_PATH) "
              "and DASHBOARD_DATABASE_URL as the web process. Workers are maintenance processes: they freeze "
              "delta mode (which reads every thread) at the file's cadence whatever mode it names, and consume "
              f"{THREAD_QUEUE}. Then launch the job again.")


@dataclass(frozen=True)
class WorkerCheck:
    """The answer: ``state`` (``ok``/``none``/``unknown``), the delta workers seen, and what to tell the operator."""

    state: str
    workers: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    detail: str = ""
    hint: str = ""
    #: When the answer was made (Unix time, seconds; 0 for an answer from heartbeats only).
    checked_at: float = field(default=0.0, compare=False)


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
        return WorkerCheck("ok", delta, others,
                           detail=f"{plural(delta, 'live worker')} consuming {THREAD_QUEUE}: {', '.join(delta)}.")
    if not replies and filesystem:
        return WorkerCheck("unknown", detail="No worker answered. The filesystem broker cannot confirm whether a "
                           "delta-mode worker is running.", hint=START_HINT)
    seen = (f" Workers answering ({', '.join(others)}) do not consume {THREAD_QUEUE} (full-mode workers)."
            if others else "")
    return WorkerCheck("none", [], others, detail=f"No live worker can run this job.{seen}", hint=START_HINT)


#: Cache key of the newest broadcast answer (:mod:`dashboard.fleet.recent`).
WORKER_CHECK_KEY = "jobs:worker_check"


def recent_worker_check(max_age_s: float) -> WorkerCheck:
    """The newest :func:`check_delta_workers` answer, for pages: never waits for the broadcast.

    An answer older than ``max_age_s`` seconds is returned and refreshed in the background; before the first
    answer the heartbeats' (:func:`registry_check`) is returned, saying that the workers are being asked.
    """
    return recent(WORKER_CHECK_KEY, check_delta_workers, max_age_s, _from_heartbeats)


def _from_heartbeats() -> WorkerCheck:
    check = registry_check()
    return replace(check, detail=f"{check.detail} (From heartbeats: the workers are being asked now; "
                   "refresh in a moment for their answer.)")


def registry_check(now=None) -> WorkerCheck:
    """Which live registered workers (heartbeat within three intervals) consume ``checkpoints.delta``.

    Returns:
        ``ok`` with the delta workers' names, or ``none`` with ``detail`` saying why: no worker heartbeat
        at all, or only workers that do not consume the queue (full-mode workers, named in ``others``).
    """
    live = [r for r in process_rows(now) if r["role"] == "worker" and r["state"] == "live"]
    delta = sorted(r["name"] for r in live if THREAD_QUEUE in (r["queues"] or []) and r["mode"] == "delta")
    others = sorted(f"{r['name']} ({r['mode']} mode)" for r in live if r["name"] not in delta)
    if delta:
        return WorkerCheck("ok", delta, others,
                           detail=f"{plural(delta, 'live worker')} consuming {THREAD_QUEUE}: {', '.join(delta)}.")
    if not live:
        return WorkerCheck("none", detail="No Celery worker has sent a heartbeat in the last three intervals: "
                           "no worker is running, or none reaches this dashboard's database.", hint=START_HINT)
    return WorkerCheck("none", [], others, detail=f"The only live workers, {', '.join(others)}, do not consume "
                       f"{THREAD_QUEUE} in delta mode (started before workers always froze delta, or with another -Q): "
                       "every thread task (dry run, conversion, compaction, prune, revert) reads a thread's whole "
                       "history and runs only there.", hint="Restart them. " + START_HINT)


def job_runnability(job) -> WorkerCheck | None:
    """For a queued or running Celery job: the :func:`registry_check` when no live worker can run it, else ``None``
    (a paused, finished or inline job waits for no worker)."""
    from dashboard.jobs.models import ConversionJob

    if job.runner != "celery" or job.state not in (ConversionJob.State.QUEUED, ConversionJob.State.RUNNING):
        return None
    check = registry_check()
    return None if check.state == "ok" else check
