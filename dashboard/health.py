"""``GET /healthz``: a cheap liveness answer for load balancers and container health checks.

Unauthenticated and data-free: it names only the process's frozen checkpoint
channel mode (and cadence in delta mode), never a thread, a database URL or
a user. It reads no database; it stats config.yaml (the same drift check the
pages run), so a process whose config.yaml now asks for another mode or
cadence reports 503 until it is restarted.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from dashboard.runtime import get_runtime
from deerflow.errors import CheckpointModeReconfigurationError, ConfigError

__all__ = ["healthz"]


def _text(body: str, status: int = 200) -> HttpResponse:
    return HttpResponse(body + "\n", status=status, content_type="text/plain; charset=utf-8")


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """``200 ok mode=<mode>[ snapshot_frequency=<n>]``, or 503 with the reason (bad config, drift)."""
    try:
        rt = get_runtime()
        rt.check_drift()
    except ConfigError:
        return _text("unavailable: config.yaml cannot be loaded; see the process log", 503)
    except CheckpointModeReconfigurationError as exc:
        return _text(f"unavailable: restart required ({exc.setting} changed on disk)", 503)
    body = f"ok mode={rt.mode}"
    if rt.mode == "delta":
        body += f" snapshot_frequency={rt.snapshot_frequency}"
    return _text(body)
