"""The Celery app. Workers are maintenance processes: they freeze delta mode at the fleet's cadence.

The dashboard's workers are not DeerFlow agents: they dry-run, convert,
compact, prune and revert stored threads, and every one of those reads a
thread's whole history, which only a delta-mode reader may do (a full-mode
reader refuses delta threads with the spec's 409). So a worker freezes
``delta`` whatever ``checkpoint_channel_mode`` its config.yaml names, at the
file's ``checkpoint_delta.snapshot_frequency`` (the cadence a compaction
writes at). The fleet audit lists workers as maintenance: their mode is not
compared with the DeerFlow processes', their cadence is.

``celeryd_after_setup`` runs in the worker's main process before the pool
forks its children, so every child inherits the frozen values and never
re-reads config.yaml (spec, "Cross-process invariant": the freeze is per OS
process). The worker also consumes ``checkpoints.delta``, the queue of thread tasks.
"""

from __future__ import annotations

import logging
import os

from celery import Celery
from celery.signals import celeryd_after_setup, worker_shutdown
from django.dispatch import Signal

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


log = logging.getLogger("dashboard.worker")

#: Sent by :func:`freeze_worker` once the worker is frozen and subscribed (``sender``: its node name; ``runtime``,
#: ``queues``, ``app``). A receiver may return a callable, which runs at ``worker_shutdown``. The fleet registry
#: connects here (``FleetConfig.ready``), so this module imports no app of the project.
worker_frozen = Signal()


def mode_queue(mode: str) -> str:
    """The queue a worker frozen in ``mode`` consumes: ``checkpoints.<mode>``."""
    return f"checkpoints.{mode}"


#: The queue of every thread task: each needs a delta reader (dry run, conversion and revert all replay delta
#: history), and every worker of the dashboard is frozen in delta mode (a maintenance process).
THREAD_QUEUE = mode_queue("delta")


@celeryd_after_setup.connect
def freeze_worker(sender: str, instance, conf, **kwargs) -> None:
    """Freeze this worker in delta mode at config.yaml's cadence (before forking), subscribe it to
    ``checkpoints.delta`` and register it; its row is marked stopped on ``worker_shutdown``."""
    from django.conf import settings

    from dashboard.runtime import serving_startup
    from deerflow.errors import ConfigError

    try:
        rt = serving_startup(settings.DEER_FLOW_CONFIG_PATH, maintenance=True)
    except ConfigError as exc:
        # Celery logs and ignores an exception raised by a signal handler, which would leave an
        # unfrozen worker consuming tasks; SystemExit is not caught: the worker stops with the message.
        log.critical("worker %s cannot start: %s", sender, exc)
        raise SystemExit(f"celery worker not started: {exc}") from exc
    instance.app.amqp.queues.select_add(mode_queue(rt.mode))
    queues = sorted(set(instance.app.amqp.queues.keys()))
    for _receiver, stop in worker_frozen.send(sender=sender, runtime=rt, queues=queues, app=instance.app):
        if callable(stop):
            worker_shutdown.connect(lambda stop=stop, **_: stop(), weak=False)
    log.warning(
        "worker %s frozen (maintenance: delta whatever config.yaml's mode, here %s): checkpoint_channel_mode=%s "
        "snapshot_frequency=%s config=%s sha256=%s queue=%s",
        sender, rt.config.mode, rt.mode, rt.snapshot_frequency, rt.config.path, rt.config.sha256[:12],
        mode_queue(rt.mode),
    )
