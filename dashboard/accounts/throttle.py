"""Login throttling with django-axes: who a client is, what is counted against whom, what a locked-out client is told.

django-axes counts failed authentications and refuses a client past ``AXES_FAILURE_LIMIT`` failures within
``AXES_COOLOFF_TIME`` with :func:`lockout_response` (429 with ``Retry-After``); lockouts are logged by axes
(logger ``axes``) and listed in the admin (``/admin/axes/``). What is counted against whom is decided here,
through axes' own extension points (docs/security.md, "Throttling"):

* **Passwords** (the login form, Django's admin login): per username and per client address
  (:func:`lockout_parameters`); a locked username refuses even the right password.
* **API bearer tokens** (:func:`django.contrib.auth.authenticate` with ``api_token`` and ``credential``, the
  name axes counts it under, :func:`token_credential`): a bad token counts against the client address and,
  when it carries a token prefix (``dfa_`` + 8 characters), against that prefix
  (``api-token:<prefix>``); never against a shared name, so one client's bad tokens cannot lock out other
  token users. A valid token is never refused nor counted (:func:`is_valid_credential`, axes'
  ``AXES_WHITELIST_CALLABLE``), so a heartbeat from a valid token always lands.
* **The metrics token** (``GET /metrics``, :func:`metrics_refusal`): a wrong one counts against the address and
  against ``metrics-token``; the right one is never refused.
"""

from __future__ import annotations

import hmac
import math
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from dashboard.errors import ErrorView, error_answer, json_error

__all__ = ["LOCKED_OUT_HINT", "METRICS_CREDENTIAL", "METRICS_PATH", "TOKEN_PREFIX_LENGTH", "attempt_username",
           "client_ip", "is_valid_credential", "lockout_parameters", "lockout_response", "metrics_refusal",
           "retry_after_s", "token_credential"]

#: Characters of a token's public prefix (``dfa_`` and 8 more; ``ApiToken.prefix``).
TOKEN_PREFIX_LENGTH = 12
#: The Prometheus route (``dashboard.metrics``).
METRICS_PATH = "/metrics"
#: The name failures of the metrics token are counted under.
METRICS_CREDENTIAL = "metrics-token"

#: What a locked-out client should do (the ``too_many_attempts`` answer).
LOCKED_OUT_HINT = ("Wait for the time given in Retry-After, then try again with the right credentials. "
                   "A superuser can lift the lockout at once: python manage.py axes_reset "
                   "(or Admin > Axes > Access attempts).")


def retry_after_s() -> int:
    """Seconds a locked-out client waits (``AXES_COOLOFF_TIME``, rounded up; at least 1)."""
    return max(1, math.ceil(settings.AXES_COOLOFF_TIME.total_seconds()))


def _locked_out() -> ErrorView:
    return ErrorView(429, "too_many_attempts",
                     f"Too many failed attempts to authenticate; this account or address is locked for "
                     f"{retry_after_s()} seconds.", LOCKED_OUT_HINT)


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict | None = None) -> HttpResponse:
    """axes' ``AXES_LOCKOUT_CALLABLE``: 429 ``too_many_attempts`` with ``Retry-After`` (seconds).

    JSON ``{"detail", "hint", "code"}`` under ``/api/`` and on ``/metrics`` (a scraper reads no page), the
    error page elsewhere.
    """
    view = _locked_out()
    response = json_error(view) if request.path == METRICS_PATH else error_answer(request, view)
    response["Retry-After"] = str(retry_after_s())
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


def token_credential(raw: str) -> str:
    """The name a presented bearer token's failures are counted under besides its address.

    ``api-token:<prefix>`` when ``raw`` looks like one of ours (``dfa_`` and at least 8 more printable ASCII
    characters), else ``""`` (address only).
    """
    prefix = raw[:TOKEN_PREFIX_LENGTH]
    if raw.startswith("dfa_") and len(prefix) == TOKEN_PREFIX_LENGTH and prefix.isascii() and prefix.isprintable():
        return f"api-token:{prefix}"
    return ""


def _is_token_attempt(credentials: dict | None) -> bool:
    return bool(credentials) and "credential" in credentials  # type: ignore[operator]


def attempt_username(request: HttpRequest, credentials: dict | None = None) -> str | None:
    """axes' ``AXES_USERNAME_CALLABLE``: the name failures are counted under.

    A token attempt: its ``credential`` (:func:`token_credential`, :data:`METRICS_CREDENTIAL`), ``None`` when
    it has none. A password attempt: the username given (as axes reads it by default).
    """
    if _is_token_attempt(credentials):
        return credentials["credential"] or None  # type: ignore[index]
    field = getattr(settings, "AXES_USERNAME_FORM_FIELD", "username")
    if credentials:
        return credentials.get(field)
    return getattr(request, "POST", {}).get(field)


def lockout_parameters(request_or_attempt: Any, credentials: dict | None = None) -> list[str]:
    """axes' ``AXES_LOCKOUT_PARAMETERS``: what a failure is counted against (each one locks on its own).

    Passwords: ``["username", "ip_address"]``. Tokens: ``["ip_address"]``, plus ``"username"`` (the token's
    prefix or :data:`METRICS_CREDENTIAL`) when the attempt has one: never a username shared by every token.
    """
    if _is_token_attempt(credentials):
        return ["ip_address", "username"] if credentials["credential"] else ["ip_address"]  # type: ignore[index]
    return ["username", "ip_address"]


def _valid_api_token(raw: str) -> bool:
    from dashboard.accounts.models import ApiToken, hash_token

    return ApiToken.objects.active().filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()),
        key_hash=hash_token(raw), user__is_active=True).exists()


def is_valid_credential(request: HttpRequest, credentials: dict | None = None) -> bool:
    """axes' ``AXES_WHITELIST_CALLABLE``: a valid API or metrics token is never locked out nor counted.

    Only the raw values are checked (Django masks them in the failure signal, which is then never whitelisted).
    """
    if not _is_token_attempt(credentials):
        return False
    raw_api, raw_metrics = credentials.get("api_token"), credentials.get("metrics_token")  # type: ignore[union-attr]
    if isinstance(raw_api, str) and raw_api:
        return _valid_api_token(raw_api)
    expected = settings.DASHBOARD_METRICS_TOKEN
    return bool(isinstance(raw_metrics, str) and expected
                and hmac.compare_digest(raw_metrics.encode(), expected.encode()))


def metrics_refusal(request: HttpRequest, sent: str) -> HttpResponse | None:
    """``None`` when ``sent`` is the metrics token; else the JSON 401 (counted by axes) or the lockout's 429.

    A request without a token is answered 401 by the caller and not counted (a scraper left without its
    token is not guessing).
    """
    from axes.handlers.proxy import AxesProxyHandler

    credentials = {"credential": METRICS_CREDENTIAL, "metrics_token": sent}
    if is_valid_credential(request, credentials):
        return None
    if not AxesProxyHandler.is_allowed(request, credentials):
        return lockout_response(request)
    user_login_failed.send(sender=__name__, credentials={"credential": METRICS_CREDENTIAL,
                                                         "metrics_token": "********"}, request=request)
    return json_error(ErrorView(401, "invalid_metrics_token", "Missing or wrong metrics token.",
                                "Send Authorization: Bearer <DASHBOARD_METRICS_TOKEN>."))
