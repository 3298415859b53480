"""Typed readers for environment variables; each raises ``ImproperlyConfigured`` on a bad value."""

from __future__ import annotations

import math
import os
import re

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    """``name`` as a boolean (1/true/yes/on or 0/false/no/off, any case)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off.")


def env_str(name: str, default: str) -> str:
    """``name`` as a string, ``default`` when unset or empty."""
    return os.environ.get(name) or default


def env_list(name: str, default: list[str]) -> list[str]:
    """``name`` as a comma-separated list with blanks dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """``name`` as an integer, optionally at least ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be >= {minimum}.")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """``name`` as a finite number (e.g. seconds), optionally at least ``minimum``.

    Raises:
        ImproperlyConfigured: the value is not a finite number, or is below ``minimum``.
    """
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from None
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        floor = "" if minimum is None else f" >= {minimum}"
        raise ImproperlyConfigured(f"{name}={raw.strip()} must be a finite number{floor}.")
    return value


_HEADER = re.compile(r"^[A-Za-z0-9-]+$")


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """``name`` as Django's ``SECURE_PROXY_SSL_HEADER``: ``None`` when unset or empty.

    The value is the header a TLS-terminating proxy sets, optionally with the
    value that means HTTPS: ``X-Forwarded-Proto`` (value ``https``) or
    ``X-Forwarded-Proto=https``. Returns ``("HTTP_X_FORWARDED_PROTO", "https")``.
    """
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return None
    header, _, value = raw.partition("=")
    header, value = header.strip(), value.strip() or "https"
    if not _HEADER.match(header):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a header name; use e.g. X-Forwarded-Proto "
                                   "(or X-Forwarded-Proto=https).")
    return "HTTP_" + header.upper().replace("-", "_"), value
