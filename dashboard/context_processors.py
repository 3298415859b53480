"""Template context shared by every page: the process's frozen mode and cadence, and the banners."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from dashboard.runtime import _runtime_if_started


def runtime(request: HttpRequest) -> dict:
    """``process_mode`` and ``process_snapshot_frequency`` (``None`` before start-up)."""
    rt = _runtime_if_started()
    return {
        "process_mode": rt.mode if rt else None,
        "process_snapshot_frequency": rt.snapshot_frequency if rt else None,
    }


def banners(request: HttpRequest) -> dict:
    """``banners``: config drift, an unreadable config.yaml, threads the fleet cannot read
    (:mod:`dashboard.fleet.banners`), for staff only (``[]`` for anyone else and before start-up).

    Lazy: computed only when a template reads it (the base template does; htmx fragments do not)."""
    rt = _runtime_if_started()
    user = getattr(request, "user", None)
    if rt is None or user is None or not user.is_staff:
        return {"banners": []}
    from dashboard.fleet.banners import banners as compute

    return {"banners": SimpleLazyObject(lambda: compute(rt))}
