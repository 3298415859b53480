"""Template context shared by every page: the process's frozen mode and cadence."""

from __future__ import annotations

from django.http import HttpRequest

from dashboard.runtime import _runtime_if_started


def runtime(request: HttpRequest) -> dict:
    """``process_mode`` and ``process_snapshot_frequency`` (``None`` before start-up)."""
    rt = _runtime_if_started()
    return {
        "process_mode": rt.mode if rt else None,
        "process_snapshot_frequency": rt.snapshot_frequency if rt else None,
    }
