"""Production security settings from the environment: ``check --deploy`` is clean under docker/compose.yaml.

The web service's environment (its ``env_file``, docker/.env.example, then its
``environment``) turns on Secure cookies, HSTS with subdomains and preload, the
TLS proxy header and the HTTPS redirect. The only value an operator must
still change is the secret, which ``check --deploy`` flags while it is the
placeholder.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from dashboard.env import env_proxy_ssl_header

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
SWITCHES = ("DASHBOARD_SECURE_COOKIES", "DASHBOARD_HSTS_SECONDS", "DASHBOARD_HSTS_INCLUDE_SUBDOMAINS",
            "DASHBOARD_HSTS_PRELOAD", "DASHBOARD_PROXY_SSL_HEADER", "DASHBOARD_SSL_REDIRECT")


def _env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def compose_environment(service: str = "web") -> dict[str, str]:
    """The environment docker compose gives ``service``: its env files, then its ``environment``."""
    svc = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))["services"][service]
    env: dict[str, str] = {}
    for name in svc.get("env_file", []):
        env.update(_env_file(DOCKER / name))
    extra = svc.get("environment") or {}
    env.update(dict(item.split("=", 1) for item in extra) if isinstance(extra, list) else
               {k: str(v) for k, v in extra.items()})
    return env


def check_deploy(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """``manage.py check --deploy --fail-level WARNING`` with exactly ``env`` (plus PATH), in a subprocess."""
    env = {**env, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DASHBOARD_VAR_DIR": str(tmp_path),
           "DEER_FLOW_CONFIG_PATH": str(DOCKER / "config" / "delta.yaml"),  # what compose mounts
           "DJANGO_SETTINGS_MODULE": "dashboard.settings"}
    return subprocess.run([sys.executable, str(REPO / "manage.py"), "check", "--deploy", "--fail-level", "WARNING"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_compose_web_turns_every_switch_on():
    env = compose_environment("web")
    assert {k: env.get(k) for k in SWITCHES} == {
        "DASHBOARD_SECURE_COOKIES": "1", "DASHBOARD_HSTS_SECONDS": "31536000",
        "DASHBOARD_HSTS_INCLUDE_SUBDOMAINS": "1", "DASHBOARD_HSTS_PRELOAD": "1",
        "DASHBOARD_PROXY_SSL_HEADER": "X-Forwarded-Proto", "DASHBOARD_SSL_REDIRECT": "1"}


def test_check_deploy_is_clean_under_the_compose_environment(tmp_path):
    env = {**compose_environment("web"), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    result = check_deploy(env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_check_deploy_flags_the_placeholder_secret(tmp_path):
    result = check_deploy(compose_environment("web"), tmp_path)
    assert result.returncode == 1
    assert "security.W009" in result.stderr
    assert "W004" not in result.stderr and "W012" not in result.stderr


def test_without_the_switches_check_deploy_names_what_is_missing(tmp_path):
    env = {k: v for k, v in compose_environment("web").items() if k not in SWITCHES}
    result = check_deploy({**env, "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}, tmp_path)
    assert result.returncode == 1
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr, warning


@pytest.mark.parametrize(("raw", "expected"), [
    ("X-Forwarded-Proto", ("HTTP_X_FORWARDED_PROTO", "https")),
    ("X-Forwarded-Ssl=on", ("HTTP_X_FORWARDED_SSL", "on")),
    ("", None),
])
def test_proxy_header_reader(monkeypatch, raw, expected):
    monkeypatch.setenv("DASHBOARD_PROXY_SSL_HEADER", raw)
    assert env_proxy_ssl_header("DASHBOARD_PROXY_SSL_HEADER") == expected


@pytest.mark.parametrize("raw", ["X Forwarded Proto", "X-Forwarded-Proto:https", "é"])
def test_a_bad_proxy_header_stops_start_up(monkeypatch, raw):
    monkeypatch.setenv("DASHBOARD_PROXY_SSL_HEADER", raw)
    with pytest.raises(ImproperlyConfigured, match="DASHBOARD_PROXY_SSL_HEADER=.*is not a header name"):
        env_proxy_ssl_header("DASHBOARD_PROXY_SSL_HEADER")


def test_a_bad_switch_stops_start_up(tmp_path):
    env = {**compose_environment("web"), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
           "DASHBOARD_SSL_REDIRECT": "maybe"}
    result = check_deploy(env, tmp_path)
    assert result.returncode != 0
    assert "DASHBOARD_SSL_REDIRECT='maybe' is not a boolean" in result.stderr


@pytest.mark.django_db
def test_behind_the_proxy_requests_are_https_with_hsts_and_secure_cookies(settings, staff_user):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = settings.SECURE_HSTS_PRELOAD = True
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    plain = Client().get("/accounts/login/")
    assert plain.status_code == 301 and plain["Location"] == "https://testserver/accounts/login/"
    assert Client().get("/healthz").status_code != 301  # the container health check stays on plain HTTP
    client = Client(HTTP_X_FORWARDED_PROTO="https")
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert page["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert page.cookies["csrftoken"]["secure"] is True
    login = client.post("/accounts/login/", {"username": "staff", "password": "staff-pass"})
    assert login.status_code == 302 and login.cookies["sessionid"]["secure"] is True
