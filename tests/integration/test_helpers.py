"""The shared subprocess helpers: :func:`tests.integration.helpers.start_worker` leaves no process behind when a
worker never gets ready (the tests that start workers rely on it in their set-up)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.integration import helpers


def _processes_naming(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_worker_that_cannot_start_is_reported_with_its_log_and_leaves_nothing(tmp_path):
    _config, var_dir = helpers.dashboard_home(tmp_path, "delta")
    env = helpers.dashboard_env(config_path=tmp_path / "missing.yaml", var_dir=var_dir)
    node = f"helper-test-{uuid.uuid4().hex[:8]}"
    with pytest.raises(AssertionError) as refused:
        helpers.start_worker(env, tmp_path / "worker.log", name="celery worker (no config)", node=node, timeout=60)
    assert "celery worker (no config)" in str(refused.value) and "exited while waiting for log" in str(refused.value)
    assert "missing.yaml" in str(refused.value)  # the log tail says why
    assert _processes_naming(node) == []
