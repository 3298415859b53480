"""Register this process, heartbeat it, and mark it stopped on clean shutdown.

Web processes register from ``dashboard/wsgi.py`` and Celery workers from the
worker's main process (``dashboard/celery.py``), right after they freeze.
A daemon thread refreshes the row every ``DASHBOARD_HEARTBEAT_S`` seconds
(default 15); a process silent for three beats (its lease) is gone
(:mod:`dashboard.fleet.processes`). A beat that fails because Django's
database is locked or unreachable logs one warning line and the next beat
retries; any other failure logs its traceback.

A process that stops cleanly deregisters (its row is marked stopped): at
interpreter exit (``atexit``), on Celery's ``worker_shutdown``, and on
SIGTERM for a process that left SIGTERM at its default (``runserver``, which
would otherwise die without running ``atexit``; gunicorn and Celery install
their own handlers and exit through ``atexit``).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import uuid
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections, connection
from django.db import utils as db_utils
from django.utils import timezone

from dashboard.fleet.facts import process_facts
from dashboard.fleet.models import ProcessRecord
from dashboard.formatting import plural
from dashboard.runtime import DashboardRuntime

__all__ = ["Registration", "record_external", "register", "register_worker", "save_facts"]

log = logging.getLogger("dashboard.fleet")
#: Failures of a beat that the next beat normally outlives (SQLite "database is locked", a database restart).
TRANSIENT_ERRORS = (db_utils.OperationalError, db_utils.InterfaceError)

_FIELDS = ("role", "host", "pid", "mode", "snapshot_frequency", "config_path", "config_sha256",
           "max_supersteps", "versions", "queues", "disk_sha256", "disk_mode", "disk_snapshot_frequency",
           "disk_error", "checkpoint_cache")


def save_facts(instance_id: str, facts: dict[str, Any], *, started_at=None, interval_s: float = 15.0,
               name: str | None = None) -> ProcessRecord:
    """Create or refresh a registry row from a facts dict (see :func:`process_facts`)."""
    now = timezone.now()
    values = {k: facts[k] for k in _FIELDS if k in facts and facts[k] is not None}
    values.update(last_heartbeat=now, stopped_at=None, heartbeat_interval_s=interval_s,
                  dismissed_at=None, dismissed_by="")
    values["name"] = name or f"{facts['role']}@{facts['host']}:{facts['pid']}"
    record, created = ProcessRecord.objects.update_or_create(
        instance_id=instance_id, defaults=values, create_defaults={**values, "started_at": started_at or now})
    return record


class Registration:
    """This process's registry row and its heartbeat thread."""

    def __init__(self, rt: DashboardRuntime, role: str, queues: list[str] | None, interval_s: float):
        self.rt, self.role, self.queues, self.interval_s = rt, role, queues or [], interval_s
        self.instance_id = uuid.uuid4().hex
        self.pid = os.getpid()
        self.started_at = timezone.now()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed_beats = 0

    def beat(self) -> ProcessRecord:
        """Write the current facts now."""
        try:
            return save_facts(self.instance_id, process_facts(self.rt, role=self.role, queues=self.queues),
                              started_at=self.started_at, interval_s=self.interval_s)
        finally:
            connection.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.beat_in_background()

    def beat_in_background(self) -> bool:
        """One beat of the heartbeat thread; never raises (the audit shows a process stale if beats keep failing).

        A :data:`TRANSIENT_ERRORS` failure logs one warning line without a
        traceback (the next beat retries); anything else logs the traceback.
        The first beat that succeeds after failures logs that it recovered.

        Returns:
            Whether the row was written.
        """
        try:
            close_old_connections()
            self.beat()
        except TRANSIENT_ERRORS as exc:
            self._failed_beats += 1
            reason = (str(exc).strip().splitlines() or [""])[0]
            log.warning("heartbeat failed (%s: %s); retrying in %g s", type(exc).__name__, reason, self.interval_s)
            return False
        except Exception:  # a failed beat must not kill the process
            self._failed_beats += 1
            log.exception("heartbeat failed")
            return False
        if self._failed_beats:
            log.info("heartbeat recovered after %s", plural(self._failed_beats, "failed beat"))
            self._failed_beats = 0
        return True

    def start(self) -> Registration:
        """Register now and start heartbeating in a daemon thread."""
        self.beat()
        self._thread = threading.Thread(target=self._loop, name="fleet-heartbeat", daemon=True)
        self._thread.start()
        atexit.register(self.stop)
        _exit_on_sigterm()
        return self

    def stop(self) -> None:
        """Stop heartbeating and mark the row stopped (clean shutdown).

        Does nothing in a forked child (a prefork pool process inherits the
        atexit hook): only the process that registered may mark its row stopped.
        """
        if self._stop.is_set() or os.getpid() != self.pid:
            return
        self._stop.set()
        try:
            ProcessRecord.objects.filter(instance_id=self.instance_id).update(stopped_at=timezone.now())
        except Exception:
            log.exception("could not mark process stopped")
        finally:
            connection.close()


def _exit_on_sigterm() -> None:
    """Turn SIGTERM into ``SystemExit`` (so ``atexit`` deregisters) when SIGTERM is at its default and this
    is the main thread; a handler someone else installed (gunicorn, Celery) is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_exit)


def _raise_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def register(rt: DashboardRuntime, role: str, queues: list[str] | None = None,
             interval_s: float | None = None) -> Registration | None:
    """Register this process and start its heartbeat; ``None`` (logged) if Django's DB is unavailable."""
    from django.conf import settings

    try:
        return Registration(rt, role, queues, interval_s or settings.DASHBOARD_HEARTBEAT_S).start()
    except Exception:
        log.exception("process registry unavailable; this process will not appear in the audit")
        return None


def register_worker(sender: str, runtime: DashboardRuntime, queues: list[str], app: Any,
                    **kwargs: Any) -> Callable[[], None] | None:
    """The receiver of :data:`dashboard.celery.worker_frozen`: register the frozen worker and start its heartbeat.

    Returns the registration's ``stop`` (run at ``worker_shutdown``: the row is marked stopped), or ``None`` when
    the registry is unavailable. The registration's id is kept on the Celery app (``deerflow_instance_id``).
    """
    registration = register(runtime, "worker", queues=queues)
    if registration is None:
        return None
    app.deerflow_instance_id = registration.instance_id
    return registration.stop


def record_external(facts: dict[str, Any]) -> ProcessRecord:
    """Store a heartbeat sent by an outside process (role ``external``)."""
    facts = {**facts, "role": "external"}
    return save_facts(facts["instance_id"], facts, interval_s=float(facts.get("heartbeat_interval_s") or 15.0),
                      name=facts.get("name") or None)
