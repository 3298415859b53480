"""The registry's rows as the audit shows them: each process's state, and the old process of a restart.

States: ``live`` (heartbeats arrive within the lease), ``gone`` (the lease,
:data:`LEASE_BEATS` heartbeat intervals, passed without a beat and without a
clean stop: killed, crashed, or its host lost), ``superseded`` (gone, and a
process with the same host, role and config started after it: the old process
of a restart), ``dismissed`` (an operator said it is gone), ``stopped`` (clean
shutdown: it deregistered). Only a live process serves, so only a live one is
compared for mode, cadence and drift. :func:`dismiss` records an operator's dismissal.

A stopped process leaves the list (:func:`process_rows`, so the audit page, ``GET /api/audit`` and the
banners) :data:`STOPPED_RETENTION` after its stop, or at once when an operator clears the stopped
processes (:func:`clear_stopped`). Its registry row stays: the stall sweep still reads it
(:func:`dashboard.jobs.stalls.owner_gone`), and a heartbeat from the same process brings it back.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Q
from django.utils import timezone

from dashboard.fleet.models import ProcessRecord

__all__ = ["DISMISSIBLE", "LEASE_BEATS", "NotDismissible", "STOPPED_RETENTION", "clear_stopped", "dismiss",
           "lease_expired", "process_rows"]

#: How long a cleanly stopped process stays listed after its stop (an operator can clear it sooner).
STOPPED_RETENTION = dt.timedelta(hours=24)

#: Heartbeat intervals a process's lease lasts: silent longer (and not stopped cleanly), it is gone.
LEASE_BEATS = 3


def lease_expired(last_heartbeat: dt.datetime, interval_s: float, now: dt.datetime) -> bool:
    """Whether a heartbeat lease ran out: ``now`` is more than :data:`LEASE_BEATS` × ``interval_s``
    seconds after ``last_heartbeat``."""
    return (now - last_heartbeat).total_seconds() > LEASE_BEATS * interval_s


def _state(p: ProcessRecord, now: dt.datetime) -> str:
    """``stopped`` (clean shutdown), ``live`` (within its lease), ``dismissed`` (an operator said it is
    gone) or ``gone`` (its lease ran out); see also :func:`_mark_superseded`."""
    if p.stopped_at:
        return "stopped"
    if not lease_expired(p.last_heartbeat, p.heartbeat_interval_s, now):
        return "live"
    return "dismissed" if p.dismissed_at else "gone"


#: States an operator may dismiss (a process that stopped beating without a clean stop).
DISMISSIBLE = ("superseded", "gone")


def _restart_key(r: dict[str, Any]) -> tuple:
    return r["host"], r["role"], r["config_path"], r["config_sha256"]


def _mark_superseded(rows: list[dict[str, Any]], unlisted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A gone row is ``superseded`` when a process with the same host, role and config (path and
    SHA-256) started after it: the old process of a restart, not a process that needs looking at.
    ``superseded_by`` names the newest such process, listed or not (``unlisted``: stopped ones no
    longer listed, see :data:`STOPPED_RETENTION`)."""
    for r in rows:
        r.setdefault("superseded_by", "")
        if r["state"] != "gone":
            continue
        newer = [o for o in rows + unlisted if o is not r and _restart_key(o) == _restart_key(r)
                 and o["started_at"] > r["started_at"] and o["state"] != "dismissed"]
        if newer:
            r["state"] = "superseded"
            r["superseded_by"] = max(newer, key=lambda o: o["started_at"])["name"]
    return rows


def _process_row(p: ProcessRecord, now: dt.datetime) -> dict[str, Any]:
    state = _state(p, now)
    return {
        "name": p.name, "instance_id": p.instance_id, "role": p.role, "host": p.host, "pid": p.pid,
        "state": state, "mode": p.mode, "snapshot_frequency": p.snapshot_frequency,
        "config_path": p.config_path, "config_sha256": p.config_sha256, "max_supersteps": p.max_supersteps,
        "versions": p.versions, "queues": p.queues, "started_at": p.started_at.isoformat(),
        "last_heartbeat": p.last_heartbeat.isoformat(), "disk_sha256": p.disk_sha256, "disk_mode": p.disk_mode,
        "disk_snapshot_frequency": p.disk_snapshot_frequency, "disk_error": p.disk_error,
        "dismissed_at": p.dismissed_at.isoformat() if p.dismissed_at else None, "dismissed_by": p.dismissed_by,
        "checkpoint_cache": p.checkpoint_cache,
        "lease_s": LEASE_BEATS * p.heartbeat_interval_s, "maintenance": p.role == "worker",
    }


def _unlisted(now: dt.datetime) -> Q:
    """The stopped rows no longer listed: cleared by an operator, or stopped over :data:`STOPPED_RETENTION` ago."""
    return Q(stopped_at__isnull=False) & (Q(dismissed_at__isnull=False) | Q(stopped_at__lt=now - STOPPED_RETENTION))


def process_rows(now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """The listed registry rows as the audit shows them (``state``: live, superseded, gone, stopped, dismissed):
    every row but the stopped ones cleared or past :data:`STOPPED_RETENTION`."""
    now = now or timezone.now()
    rows = [_process_row(p, now) for p in ProcessRecord.objects.exclude(_unlisted(now))]
    unlisted: list[dict[str, Any]] = []
    if any(r["state"] == "gone" for r in rows):
        unlisted = [{**v, "state": "stopped", "started_at": v["started_at"].isoformat()}
                    for v in ProcessRecord.objects.filter(_unlisted(now)).values(
                        "name", "host", "role", "config_path", "config_sha256", "started_at")]
    return _mark_superseded(rows, unlisted)


def clear_stopped(username: str, now: dt.datetime | None = None) -> int:
    """Take every cleanly stopped process off the list now (recorded as dismissed by ``username``), and return
    how many. Live, gone and restarted processes are left as they are (:func:`dismiss` takes those one by one)."""
    now = now or timezone.now()
    return ProcessRecord.objects.filter(stopped_at__isnull=False, dismissed_at__isnull=True).update(
        dismissed_at=now, dismissed_by=username[:150])



class NotDismissible(Exception):
    """The process is live or stopped cleanly: there is nothing to dismiss (``state`` says which)."""

    def __init__(self, name: str, state: str):
        super().__init__(f"{name} is {state}: only a restarted or gone process can be dismissed "
                         "(stopped ones leave with Clear stopped processes).")
        self.state = state


def dismiss(instance_id: str, username: str, now: dt.datetime | None = None) -> ProcessRecord:
    """Mark a superseded or gone process dismissed by ``username`` (it leaves the findings; a
    heartbeat from it later brings it back).

    Raises:
        ProcessRecord.DoesNotExist: no process has this ``instance_id``.
        NotDismissible: it is live or stopped (:data:`DISMISSIBLE` lists the states that may be dismissed).
    """
    now = now or timezone.now()
    row = next((r for r in process_rows(now) if r["instance_id"] == instance_id), None)
    if row is None:
        raise ProcessRecord.DoesNotExist(f"No registered process has the instance id {instance_id!r}.")
    if row["state"] not in DISMISSIBLE:
        raise NotDismissible(row["name"], row["state"])
    ProcessRecord.objects.filter(instance_id=instance_id).update(dismissed_at=now, dismissed_by=username[:150])
    return ProcessRecord.objects.get(instance_id=instance_id)
