"""A bad config.yaml stops a web process and a Celery worker at start-up, with the message, writing nothing.

Each case starts the real thing in a subprocess, as an operator would:
the WSGI module gunicorn loads (``import dashboard.wsgi``) and ``celery -A
dashboard worker``. Both must exit non-zero with the loader's message
(naming the file, the key and the allowed values; the ``memory`` backend is
refused as the management commands refuse it), and neither may have
written anything: the dashboard's SQLite database is not even created (the
process registry is written only after the freeze). The loader's own
messages are tested case by case in ``tests/deerflow/config/test_config_loader.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration import helpers

GOOD_BLOCK = "database:\n  backend: sqlite\n  sqlite_dir: {data}\n"
CASES = {
    "missing": (None, "config file not found"),
    "empty": ("", "config file is empty"),
    "malformed": ("database: [backend: sqlite\n", "config file is not valid YAML at line"),
    "unknown_mode": (GOOD_BLOCK + "  checkpoint_channel_mode: sideways\n",
                     "database.checkpoint_channel_mode: Input should be 'full' or 'delta'"),
    "cadence_0": (GOOD_BLOCK + "  checkpoint_delta:\n    snapshot_frequency: 0\n",
                  "database.checkpoint_delta.snapshot_frequency"),
    "cadence_negative": (GOOD_BLOCK + "  checkpoint_delta:\n    snapshot_frequency: -1\n",
                         "database.checkpoint_delta.snapshot_frequency"),
    "cadence_ten": (GOOD_BLOCK + "  checkpoint_delta:\n    snapshot_frequency: ten\n",
                    "database.checkpoint_delta.snapshot_frequency"),
    "unset_var": ("database:\n  backend: postgres\n  postgres_url: $DFA_HARDENING_UNSET_URL\n",
                  "environment variable DFA_HARDENING_UNSET_URL is not set"),
    # as the commands refuse it (dashboard.commands): an in-memory saver has nothing to browse
    "memory": ("database:\n  backend: memory\n",
               "database.backend: memory cannot be browsed or converted"),
}


def _home(tmp_path: Path, case: str) -> tuple[dict[str, str], Path]:
    data = tmp_path / "data"
    data.mkdir()
    config = tmp_path / "config.yaml"
    text, _ = CASES[case]
    if text is not None:
        config.write_text(text.format(data=data), encoding="utf-8")
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    env = helpers.dashboard_env(config_path=config, var_dir=var_dir)
    env.pop("DFA_HARDENING_UNSET_URL", None)
    return env, var_dir


def _assert_refused(proc: subprocess.CompletedProcess, case: str, var_dir: Path) -> None:
    _, expected = CASES[case]
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-2000:]
    assert expected in output, output[-2000:]
    assert "config.yaml" in output
    assert not (var_dir / "dash.sqlite3").exists(), "the process wrote to the dashboard database"


@pytest.mark.parametrize("case", sorted(CASES))
def test_web_process_refuses_to_start(tmp_path, case):
    env, var_dir = _home(tmp_path, case)
    proc = subprocess.run([helpers.PYTHON, "-c", "import dashboard.wsgi"], cwd=helpers.REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    _assert_refused(proc, case, var_dir)
    assert "ImproperlyConfigured" in proc.stderr


@pytest.mark.parametrize("case", sorted(CASES))
def test_worker_refuses_to_start(tmp_path, case):
    env, var_dir = _home(tmp_path, case)
    argv = [str(helpers.VENV_BIN / "celery"), "-A", "dashboard", "worker", "-Q", "dashboard", "--pool", "solo",
            "--without-mingle", "--without-gossip"]
    proc = subprocess.run(argv, cwd=helpers.REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    _assert_refused(proc, case, var_dir)
    assert "celery worker not started" in proc.stderr


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/threads/", "/threads/some-thread/", "/api/threads"])
def test_a_process_started_lazily_on_a_bad_config_answers_503_config_error(tmp_path, monkeypatch, staff_client, path):
    """``manage.py runserver`` starts the runtime on the first request: a bad file is a 503 page, not a 500."""
    from dashboard.runtime import install_runtime

    previous = install_runtime(None)
    monkeypatch.setenv("DEER_FLOW_CONFIG_PATH", str(tmp_path / "missing.yaml"))
    try:
        response = staff_client.get(path)
    finally:
        install_runtime(previous)
    assert response.status_code == 503
    text = response.content.decode()
    assert "config file not found" in text and "missing.yaml" in text
    if path.startswith("/api/"):
        assert response.json()["code"] == "config_error"
