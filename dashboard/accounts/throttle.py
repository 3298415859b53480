"""Login throttling with django-axes: who a client is, and what a locked-out client is told.

django-axes counts failed authentications (the login form, Django's admin
login, and API bearer tokens, which go through :func:`django.contrib.auth.authenticate`
with :class:`~dashboard.accounts.backends.ApiTokenBackend`) per username and per
client address (``settings.AXES_LOCKOUT_PARAMETERS``). Once either reaches
``AXES_FAILURE_LIMIT`` within ``AXES_COOLOFF_TIME``, every attempt from it is
answered by :func:`lockout_response`: 429 with ``Retry-After``. Lockouts are
logged by axes (logger ``axes``) and listed in the admin (``/admin/axes/``).
"""

from __future__ import annotations

import math

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from dashboard.errors import ErrorView, error_answer

__all__ = ["LOCKED_OUT_HINT", "client_ip", "lockout_response", "retry_after_s"]

#: What a locked-out client should do (the ``too_many_attempts`` answer).
LOCKED_OUT_HINT = ("Wait for the time given in Retry-After, then try again with the right credentials. "
                   "A superuser can lift the lockout at once: python manage.py axes_reset "
                   "(or Admin > Axes > Access attempts).")


def retry_after_s() -> int:
    """Seconds a locked-out client waits (``AXES_COOLOFF_TIME``, rounded up; at least 1)."""
    return max(1, math.ceil(settings.AXES_COOLOFF_TIME.total_seconds()))


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict | None = None) -> HttpResponse:
    """axes' ``AXES_LOCKOUT_CALLABLE``: 429 ``too_many_attempts`` with ``Retry-After`` (seconds).

    JSON ``{"detail", "hint", "code"}`` under ``/api/``, the error page elsewhere.
    """
    wait = retry_after_s()
    view = ErrorView(429, "too_many_attempts",
                     f"Too many failed attempts to authenticate; this account or address is locked for "
                     f"{wait} seconds.", LOCKED_OUT_HINT)
    response = error_answer(request, view)
    response["Retry-After"] = str(wait)
    return response


def client_ip(request: HttpRequest) -> str | None:
    """The client's address axes counts failures for (``AXES_CLIENT_IP_CALLABLE``).

    ``REMOTE_ADDR``, or, behind ``DASHBOARD_PROXY_COUNT`` trusted reverse
    proxies, the address the outermost of them saw (that many entries from
    the right of ``X-Forwarded-For``; entries further left are the client's own
    and could be forged). ``None`` when there is neither.
    """
    count = settings.DASHBOARD_PROXY_COUNT
    if count:
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        if len(hops) >= count:
            return hops[-count]
    return request.META.get("REMOTE_ADDR")
