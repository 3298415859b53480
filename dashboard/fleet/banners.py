"""The banner on every page: config drift, an unreadable or invalid config.yaml, and a fleet that cannot
read some threads.

Two sources, both cheap enough for every request:

* this process (:func:`process_banners`): one ``stat`` of config.yaml
  (:meth:`DashboardRuntime.disk_config` re-parses only a changed file), so a
  drift or a typo shows on the very next page;
* the fleet (:func:`fleet_banners`): the audit's registry findings (one query
  on the small process registry) and the threads per mode from the thread
  summary (one ``GROUP BY``), cached for :data:`CACHE_S` seconds per process;
  never the live check or a scan of ``checkpoints``.

Each banner links to the audit page, which raises the same findings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.cache import cache

from dashboard.fleet.audit import Finding, readability_findings, registry_findings
from dashboard.fleet.findings import is_maintenance
from dashboard.fleet.processes import process_rows
from dashboard.runtime import DashboardRuntime
from deerflow import inventory
from deerflow.errors import CheckpointModeReconfigurationError
from deerflow.storage import has_sql_tables

__all__ = ["BANNER_CODES", "CACHE_S", "Banner", "banners", "fleet_banners", "process_banners"]

log = logging.getLogger("dashboard.fleet")

#: Seconds the fleet part is reused (the heartbeat interval: the registry changes no faster).
CACHE_S = 15
#: The audit findings that become banners.
BANNER_CODES = ("config_drift", "config_unreadable", "mode_mismatch", "cadence_mismatch",
                "full_fleet_unreadable_threads")
_CACHE_KEY = "dashboard.fleet.banners"


@dataclass(frozen=True)
class Banner:
    """One banner: ``severity`` (``error``/``warning``), the finding's ``code``, what is wrong and what to do."""

    severity: str
    code: str
    message: str
    hint: str


def _from_finding(f: Finding) -> Banner:
    return Banner(f.severity, f.code, f.message, f.hint)


def process_banners(rt: DashboardRuntime) -> list[Banner]:
    """This process's own config.yaml as it is on disk now: drifted (error) or unreadable/invalid (warning)."""
    disk, error = rt.disk_config()
    if error:
        return [Banner("warning", "config_unreadable", f"This process's config.yaml cannot be read: {error}",
                       "The process keeps serving with its frozen mode and cadence, but would not start again: "
                       "fix the file before restarting anything.")]
    try:
        rt.check_drift()
    except CheckpointModeReconfigurationError as exc:
        return [Banner("error", "config_drift",
                       f"config.yaml changed after this process froze: {exc.setting} {exc.frozen} (frozen) ≠ "
                       f"{exc.requested} (on disk). Thread pages answer 503.",
                       "Restart every process sharing the checkpoint database together, with one config.yaml.")]
    return []


def _delta_threads(rt: DashboardRuntime) -> int:
    if not has_sql_tables(rt.saver):
        return 0
    return inventory.storage_by_mode(rt.saver, refresh=False)["delta"]["threads"]


def _compute_fleet(rt: DashboardRuntime) -> list[Banner]:
    rows = process_rows()
    findings = [f for f in registry_findings(rows) if f.code in BANNER_CODES]
    full = sorted({r["name"] for r in rows if r["state"] == "live" and r["mode"] == "full" and not is_maintenance(r)})
    if rt.mode == "full" and not full:
        full = ["this dashboard process"]  # not registered (e.g. runserver): it still refuses delta threads
    findings += readability_findings(full, _delta_threads(rt) if full else 0)
    return [_from_finding(f) for f in findings]


def fleet_banners(rt: DashboardRuntime) -> list[Banner]:
    """The fleet's banners (registry findings in :data:`BANNER_CODES`, delta threads a full-mode process
    refuses), cached :data:`CACHE_S` seconds. A failure to compute them (database down) logs and shows none:
    the page itself says what is down."""
    cached = cache.get(_CACHE_KEY)
    if cached is not None:
        return cached
    try:
        out = _compute_fleet(rt)
    except Exception:  # a banner must never break the page it sits on
        log.exception("computing the fleet banners failed")
        return []
    cache.set(_CACHE_KEY, out, CACHE_S)
    return out


def banners(rt: DashboardRuntime) -> list[Banner]:
    """This process's banners, then the fleet's, one per code (this process's own word wins)."""
    own = process_banners(rt)
    codes = {b.code for b in own}
    return own + [b for b in fleet_banners(rt) if b.code not in codes]
