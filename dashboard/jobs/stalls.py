"""Thread tasks the broker lost, and threads whose worker died: both swept so every job ends.

Two sweeps, both run by the beat task ``jobs.requeue_stalled`` (every minute) and
the ``requeue_stalled_threads`` command:

* :func:`requeue_stalled`: rows ``queued`` for too long are sent again (below);
* :func:`recover_abandoned`: rows ``running`` whose worker is gone (see its docstring).

A row is ``queued`` from the moment its task (``jobs.run_threads``, a batch) is sent
until a worker claims it. If the broker loses the message (a Redis without
persistence restarted, a queue purged by hand), no worker will ever claim
the row, its slot counts as in flight for ever and the job never finishes.

:func:`requeue_stalled` finds Celery jobs' rows that have been queued for
longer than a threshold past their due time (``queued_at``: send time plus
countdown) and sends one task per row again, through the caller's ``send``
(the beat task ``jobs.requeue_stalled`` and the ``requeue_stalled_threads``
command both pass ``jobs.run_thread``). Sending twice is safe: a worker claims a row only
while it is ``queued`` (``dashboard.jobs.running._claim``), so a duplicate finds it taken
and does nothing. The threshold must exceed how long a message may wait in
a busy queue, or a healthy backlog gets duplicate (harmless, no-op) tasks.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from dashboard.jobs import owners
from dashboard.jobs.models import ConversionJob, ThreadResult

__all__ = ["LEASE_BEATS", "MAX_WORKER_LOSSES", "WORKER_LOST_HINT", "Recovery", "owner_gone", "recover_abandoned",
           "requeue_stalled", "stalled_rows"]

log = logging.getLogger("dashboard.jobs")

#: Heartbeats a worker may miss before the rows it claimed are presumed abandoned (the audit's "stale").
LEASE_BEATS = 3
#: Claims (``attempts``: lost workers and retried locks alike) after which a row whose worker is lost is failed
#: instead of run again (a thread that kills its worker, e.g. out of memory, must not kill every worker in turn).
MAX_WORKER_LOSSES = 5
#: What to do about a row failed or skipped because its worker died.
WORKER_LOST_HINT = ("The worker running this thread stopped (killed, out of memory, or its host went away) before "
                    "it recorded an outcome. Its transaction was rolled back, so the thread is as it was: retry the "
                    "job. If it happens again, read that worker's log and the kernel log (dmesg) for the cause.")


def _stalled(older_than_s: float, now: dt.datetime, job: ConversionJob | None = None):
    cutoff = now - dt.timedelta(seconds=older_than_s)
    rows = ThreadResult.objects.filter(
        status=ThreadResult.QUEUED, job__state=ConversionJob.State.RUNNING, job__runner="celery",
        queued_at__lte=cutoff)
    return rows if job is None else rows.filter(job=job)


def stalled_rows(older_than_s: float, job: ConversionJob | None = None) -> int:
    """How many rows (of ``job``, else of every running Celery job) are still ``queued`` ``older_than_s``
    seconds or more past their due time (count)."""
    return _stalled(older_than_s, timezone.now(), job).count()


def requeue_stalled(older_than_s: float, send: Callable[[int], None]) -> list[int]:
    """Send again, with ``send(result_id)``, each row still ``queued`` ``older_than_s`` seconds past its due time.

    Only rows of ``running`` jobs whose runner is Celery: a paused job's queued
    rows went back to pending, and a job the command runs in its own process
    (``convert_threads``) sends no messages. Each row sent has its
    ``queued_at`` moved to now, so the next sweep waits a whole threshold
    again; a row whose send raised keeps its old ``queued_at`` and is found
    again by the next sweep.

    Args:
        older_than_s: seconds a row may stay ``queued`` past its due time before its
            message is presumed lost (``DASHBOARD_REQUEUE_AFTER_S``, default 600).
        send: sends ``jobs.run_thread`` for one row id (raises when the broker is unreachable).

    Returns:
        The ids sent, in row order.

    Raises:
        ValueError: ``older_than_s`` is negative.
        Whatever ``send`` raises (the rows sent before it stay marked).
    """
    if older_than_s < 0:
        raise ValueError(f"older_than_s must be 0 or more seconds; got {older_than_s}")
    ids = list(_stalled(older_than_s, timezone.now()).order_by("id").values_list("id", flat=True))
    sent = []
    for result_id in ids:
        send(result_id)
        ThreadResult.objects.filter(id=result_id, status=ThreadResult.QUEUED).update(queued_at=timezone.now())
        sent.append(result_id)
    return sent


@dataclass
class Recovery:
    """What :func:`recover_abandoned` did: rows sent again, rows failed or skipped, and the jobs it touched."""

    sent: list[int] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    jobs: set[int] = field(default_factory=set)


def owner_gone(row: Mapping[str, Any], now: dt.datetime, lease_s: float | None = None) -> bool:
    """Whether the worker that claimed a ``running`` row is gone.

    On this host: its pid no longer exists (:func:`dashboard.jobs.owners.owner_alive`). On another host:
    no worker of that host registered by the time the row was claimed, and not stopped since, has
    heartbeated within the lease (:data:`LEASE_BEATS` of its own heartbeat interval, or ``lease_s`` when
    given): a worker restarted since registers anew, after the claim, and does not vouch for the rows of
    the one it replaced. A row without a recorded owner, or of a host none of whose workers ever
    registered, is not judged gone (nothing says so; a redelivered task still reclaims it).

    Args:
        row: the row's ``worker_host``, ``worker_pid``, ``worker_node``, ``started_at`` and ``id``.
        now: the sweep's clock.
        lease_s: seconds without a heartbeat after which a remote worker is gone (default per worker).
    """
    if not row["worker_host"]:
        return False  # no owner recorded: cannot tell
    if row["worker_host"] == socket.gethostname() and row["worker_pid"]:
        return owners.owner_alive(dict(row), row["id"]) is False
    from dashboard.fleet.models import ProcessRecord

    workers = list(ProcessRecord.objects.filter(role="worker", host=row["worker_host"]))
    if not workers:
        return False  # a host whose workers never registered: cannot tell (a redelivery still reclaims the row)
    claimed = row["started_at"] or now
    return not any(w.stopped_at is None and w.started_at <= claimed
                   and (now - w.last_heartbeat).total_seconds() <= (lease_s or LEASE_BEATS * w.heartbeat_interval_s)
                   for w in workers)


_OPEN_JOB_STATES = (ConversionJob.State.RUNNING, ConversionJob.State.PAUSED, ConversionJob.State.CANCELLING)


def recover_abandoned(send: Callable[[int], None], *, job: ConversionJob | None = None,
                      lease_s: float | None = None) -> Recovery:
    """Release every ``running`` row of a Celery job whose worker is gone (:func:`owner_gone`).

    A SIGKILLed worker leaves the row it was running ``running`` with its pid. Redis and RabbitMQ
    deliver the unacknowledged task again (RabbitMQ at once, Redis after its visibility timeout), but
    Kombu's filesystem transport has already deleted the message: without this sweep nothing would
    ever claim the row, and the job would never end. What happens to the row depends on its job
    (each change is a conditional UPDATE on the claim number seen, so a row a redelivered task took
    over meanwhile is left to it):

    * job ``running``: back to ``queued`` and sent again with ``send`` (the next claim bumps ``attempts``,
      so the dead attempt can never record); after :data:`MAX_WORKER_LOSSES` lost workers it is recorded
      ``error`` / ``worker_lost`` instead. The rows of its batch the dead worker never reached (still
      ``queued``, same ``batch``) are sent again too, at once rather than after the stalled-row threshold:
      on the filesystem broker their message died with the worker;
    * job ``paused``: back to ``pending`` (what pause does to queued rows; resume sends it);
    * job ``cancelling``: ``skipped`` / ``worker_lost``; the job then ends ``cancelled``.

    The rewrite a dead worker was running was one transaction, rolled back with its connection, so the
    thread is as it was; a rewrite that committed just before the kill is found by the next attempt
    (its backup names the job) and recorded as done. Callers then move each job in :attr:`Recovery.jobs`
    on (``claim_batch``) so a job with nothing left ends.

    Args:
        send: sends ``jobs.run_thread`` for one row id.
        job: only this job's rows (a second Cancel), else every open Celery job's.
        lease_s: see :func:`owner_gone`.

    Returns:
        :class:`Recovery`.
    """
    now = timezone.now()
    rows = ThreadResult.objects.filter(status=ThreadResult.RUNNING, job__runner="celery",
                                       job__state__in=_OPEN_JOB_STATES)
    if job is not None:
        rows = rows.filter(job=job)
    done = Recovery()
    for row in rows.order_by("id").values("id", "job_id", "job__state", "attempts", "worker_host", "worker_pid",
                                          "worker_node", "started_at", "batch"):
        if not owner_gone(row, now, lease_s):
            continue
        if _release(row, now, send, done):
            done.jobs.add(row["job_id"])
            log.warning("job %s: row %s was running on %s pid %s, which is gone; %s", row["job_id"], row["id"],
                        row["worker_host"], row["worker_pid"],
                        "sent again" if row["id"] in done.sent else "ended as worker_lost"
                        if row["id"] in done.ended else "back to pending")
    return done


def _release(row: Mapping[str, Any], now: dt.datetime, send: Callable[[int], None], done: Recovery) -> bool:
    same = ThreadResult.objects.filter(pk=row["id"], status=ThreadResult.RUNNING, attempts=row["attempts"])
    lost = {"error_code": "worker_lost", "hint": WORKER_LOST_HINT, "finished_at": now}
    state = row["job__state"]
    if state == ConversionJob.State.CANCELLING:
        changed = same.update(status=ThreadResult.SKIPPED, error="Cancelled: its worker stopped before it "
                              "finished; the thread was left as it was.", **lost)
        done.ended.extend([row["id"]] if changed else [])
    elif state == ConversionJob.State.PAUSED:
        changed = same.update(status=ThreadResult.PENDING)
    elif row["attempts"] >= MAX_WORKER_LOSSES:
        changed = same.update(status=ThreadResult.ERROR, error=f"Its worker stopped {row['attempts']} times while "
                              "running this thread; it is not run again.", **lost)
        done.ended.extend([row["id"]] if changed else [])
    else:
        changed = same.update(status=ThreadResult.QUEUED, queued_at=now)
        if changed:
            send(row["id"])
            done.sent.append(row["id"])
            _send_unreached(row, now, send, done)
    return bool(changed)


def _send_unreached(row: Mapping[str, Any], now: dt.datetime, send: Callable[[int], None], done: Recovery) -> None:
    """Send again the rows of a dead worker's batch it never reached (still queued in the same batch)."""
    if row["batch"] is None:
        return
    for sibling in ThreadResult.objects.filter(job_id=row["job_id"], batch=row["batch"], status=ThreadResult.QUEUED
                                               ).exclude(pk=row["id"]).order_by("id").values_list("id", flat=True):
        if ThreadResult.objects.filter(pk=sibling, status=ThreadResult.QUEUED).update(queued_at=now):
            send(sibling)
            done.sent.append(sibling)
