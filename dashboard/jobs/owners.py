"""Is the process that claimed a ``running`` row still running it?

Asked before a row is taken over (``dashboard.jobs.running._claim``). A redelivered
``jobs.run_thread`` message means the broker believes its worker was lost,
but Kombu also redelivers when the worker merely lost its broker connection
for a moment (it restores its unacknowledged messages): then the owner is
alive and still converting, and a second claim would convert the same
thread twice at once. Three answers:

* same host: the owner's OS pid exists (``True``) or not (``False``);
* another host: the owner's Celery node is asked which tasks it runs
  (``inspect(destination=[node]).active()``): listed (``True``), the node
  answered without it (``False``), no answer in time (``None``);
* no owner recorded: ``None``.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

log = logging.getLogger("dashboard.jobs")

__all__ = ["owner_alive"]

#: Seconds to wait for the owner's node to answer (only asked for a redelivered task of a running row).
INSPECT_TIMEOUT_S = 2.0


def owner_alive(row: dict[str, Any], result_id: int, *, app=None, timeout: float = INSPECT_TIMEOUT_S) -> bool | None:
    """Whether the owner recorded on ``row`` still runs the row (``jobs.run_thread`` or a ``jobs.run_threads``
    batch holding it).

    Args:
        row: the row's ``worker_host``, ``worker_pid`` and ``worker_node``.
        result_id: the row's id.
        app: the Celery app to ask (default: the dashboard's).
        timeout: seconds to wait for another host's node to answer.

    Returns:
        ``True`` (alive and running it), ``False`` (gone, or no longer running it),
        ``None`` (cannot tell). Never raises.
    """
    host, pid, node = row.get("worker_host"), row.get("worker_pid"), row.get("worker_node")
    if host == socket.gethostname() and pid:
        if pid == os.getpid():
            return False  # this very process: its earlier run of the row is over
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by another user
        return True
    if not node:
        return None
    if app is None:
        from dashboard.celery import app
    try:
        replies = app.control.inspect(destination=[node], timeout=timeout).active() or {}
    except Exception as exc:  # broker down: cannot tell
        log.warning("could not ask %s whether it still runs row %s: %s", node, result_id, exc)
        return None
    if node not in replies:
        return None
    return any(_runs(task, result_id) for task in replies[node] or [])


def _runs(task: dict[str, Any], result_id: int) -> bool:
    """An active task (as ``inspect().active()`` lists it) runs the row: ``jobs.run_thread(result_id)``, or a
    ``jobs.run_threads`` batch holding it (the row is ``running``, so the batch has reached it)."""
    args = list(task.get("args") or [])
    if task.get("name") == "jobs.run_thread":
        return args == [result_id]
    return task.get("name") == "jobs.run_threads" and bool(args) and result_id in (args[0] or [])
