"""Whether a job may be launched now: refused at launch, never accepted to wait (:func:`admit_launch`).

Two reasons to refuse, both answered 503 with what to do:

* this process's config.yaml drifted (mode or cadence on disk differ from what it froze): the launch answers
  what the thread pages answer for a ``CheckpointModeReconfigurationError`` (503, its detail and hint: restart);
* a Celery job while no live worker consumes ``checkpoints.delta`` (the fleet registry's heartbeats,
  :func:`dashboard.jobs.workers.registry_check`): :class:`NoLiveWorker`, naming why (no worker heartbeat,
  or only workers that cannot run it) and the command that starts one. A job accepted then would sit
  "queued" until someone noticed.

An inline job (a management command) runs in the launching process and needs no worker.
"""

from __future__ import annotations

from dashboard.errors.jobs import LaunchDuringDrift, NoLiveWorker
from dashboard.errors.registry import describe
from dashboard.runtime import get_runtime
from deerflow.errors import CheckpointModeReconfigurationError

__all__ = ["admit_launch"]


def admit_launch(runner: str) -> None:
    """Refuse a launch this deployment cannot run now.

    Args:
        runner: ``celery`` (the job's threads run on workers) or ``inline`` (in this process).

    Raises:
        LaunchDuringDrift: config.yaml on disk asks for another mode or cadence than this process froze
            (503 ``checkpoint_mode_reconfiguration``: the thread pages' detail and hint).
        NoLiveWorker: a ``celery`` job while no live registered worker consumes ``checkpoints.delta`` (503).
    """
    try:
        get_runtime().check_drift()
    except CheckpointModeReconfigurationError as exc:
        drift = describe(exc)
        raise LaunchDuringDrift(drift.detail, hint=drift.hint) from exc
    if runner != "celery":
        return
    from dashboard.jobs.workers import registry_check  # it imports the tasks, which import the job services

    check = registry_check()
    if check.state != "ok":
        raise NoLiveWorker(f"Not launched: {check.detail}", hint=check.hint)
