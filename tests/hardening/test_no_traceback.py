"""No command prints a traceback without ``--traceback``: one line saying what failed, one saying what to do.

Runs ``manage.py`` in subprocesses: a bad setting (read at start-up), and a
Django command (``migrate``) whose database cannot be reached (an error no
dashboard command describes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def manage(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DJANGO_SECRET_KEY": "test-only-secret-key",
            "DASHBOARD_VAR_DIR": str(tmp_path), "DEER_FLOW_CONFIG_PATH": str(REPO / "docker/config/delta.yaml"),
            "DJANGO_SETTINGS_MODULE": "dashboard.settings"}
    return subprocess.run([sys.executable, str(REPO / "manage.py"), *args], env={**base, **env}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_a_bad_setting_is_one_line_and_a_hint(tmp_path):
    result = manage("check", tmp_path=tmp_path, DASHBOARD_SSL_REDIRECT="maybe")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "ImproperlyConfigured: DASHBOARD_SSL_REDIRECT='maybe' is not a boolean; use 1/0, true/false, yes/no or on/off.",
        "What to do: fix that environment variable (README, Configuration) and run the command again."]


@pytest.mark.postgres
def test_an_unexpected_error_is_one_line_unless_traceback_is_asked(tmp_path):
    down = {"DASHBOARD_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nowhere"}
    result = manage("migrate", "--noinput", tmp_path=tmp_path, **down)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("OperationalError: connection failed")
    assert result.stderr.rstrip().endswith("What to do: run the command again with --traceback to see where it failed.")
    traced = manage("migrate", "--noinput", "--traceback", tmp_path=tmp_path, **down)
    assert traced.returncode == 1 and "Traceback (most recent call last)" in traced.stderr
