"""Template context shared by every page: the process's frozen mode and cadence, and the banners."""

from __future__ import annotations

from django.db import DatabaseError
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from dashboard.errors.outages import OUTAGES, is_outage
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
    try:
        staff = user is not None and user.is_staff  # loads the session's user: the database may be down
    except DatabaseError:
        return {"banners": []}  # the page being drawn is the outage's own 503 page: it says what is wrong
    if rt is None or not staff:
        return {"banners": []}
    from dashboard.fleet.banners import banners as compute

    def safe() -> list:
        try:
            return compute(rt)
        except (DatabaseError, *OUTAGES) as exc:
            if not is_outage(exc) and not isinstance(exc, DatabaseError):
                raise
            return []  # the banner is an extra: an outage must not turn the page into an error
    return {"banners": SimpleLazyObject(safe)}
