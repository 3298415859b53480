"""The Celery app. Workers freeze mode and cadence from config.yaml at start-up.

``celeryd_after_setup`` runs in the worker's main process before the pool
forks its children, so every child inherits the frozen values and never
re-reads config.yaml (spec, "Cross-process invariant": the freeze is per OS
process). The worker also consumes the queue named after its frozen mode
(``checkpoints.full`` or ``checkpoints.delta``), so work that needs a delta
reader is routed only to delta workers.
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


@celeryd_after_setup.connect
def freeze_worker(sender: str, instance, conf, **kwargs) -> None:
    """Freeze this worker from config.yaml (before forking) and subscribe to its mode queue."""
    from django.conf import settings

    from dashboard.runtime import serving_startup
    from deerflow.errors import ConfigError

    try:
        rt = serving_startup(settings.DEER_FLOW_CONFIG_PATH)
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
        "worker %s frozen: checkpoint_channel_mode=%s snapshot_frequency=%s config=%s sha256=%s queue=%s",
        sender, rt.mode, rt.snapshot_frequency, rt.config.path, rt.config.sha256[:12], mode_queue(rt.mode),
    )
