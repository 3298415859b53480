"""This process's facts: what it froze, what its config file says now, and its versions.

The same dict is stored by heartbeats, returned by the live-check control
command, and accepted from outside processes at ``POST /api/processes/heartbeat``.
"""

from __future__ import annotations

import os
import socket
from importlib import metadata
from typing import Any

from dashboard.runtime import DashboardRuntime

__all__ = ["process_facts", "package_versions", "max_supersteps"]

_PACKAGES = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres",
             "langgraph-checkpoint-sqlite", "deerflow-checkpoint-admin")


def package_versions() -> dict[str, str]:
    """Installed versions of LangGraph, its savers and this project (``"missing"`` if absent)."""
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def max_supersteps() -> int:
    """LangGraph's ``DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT`` as this process sees it (count)."""
    # Reading the bound imports LangGraph; only a heartbeat asks, never a web process's start-up.
    from deerflow.convert import MAX_SUPERSTEPS

    return int(MAX_SUPERSTEPS)


def process_facts(rt: DashboardRuntime, *, role: str, queues: list[str] | None = None) -> dict[str, Any]:
    """The facts a process reports about itself.

    Returns:
        ``{"role", "host", "pid", "mode", "snapshot_frequency", "config_path",
        "config_sha256", "max_supersteps", "versions", "queues", "disk_sha256",
        "disk_mode", "disk_snapshot_frequency", "disk_error", "checkpoint_cache"}`` (``checkpoint_cache``:
        :func:`dashboard.fleet.history_cache.cache_setting`).
    """
    from dashboard.fleet.history_cache import cache_setting

    disk, error = rt.disk_config()
    return {
        "role": role,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "mode": rt.mode,
        "snapshot_frequency": rt.snapshot_frequency,
        "config_path": str(rt.config.path),
        "config_sha256": rt.config.sha256,
        "max_supersteps": max_supersteps(),
        "versions": package_versions(),
        "queues": list(queues or []),
        "disk_sha256": disk.sha256 if disk else "",
        "disk_mode": disk.mode if disk else "",
        "disk_snapshot_frequency": disk.snapshot_frequency if disk else None,
        "disk_error": error or "",
        "checkpoint_cache": cache_setting(rt.config.database),
    }
