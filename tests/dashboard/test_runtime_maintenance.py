"""dashboard.runtime for maintenance processes (the dashboard's Celery workers): they freeze delta at the
file's cadence whatever mode config.yaml names, and only a cadence change on disk drifts them."""

from __future__ import annotations

import pytest

from dashboard.runtime import DashboardRuntime
from deerflow.config import load_config
from deerflow.errors import CheckpointModeReconfigurationError
from deerflow.runtime.checkpoint_mode import frozen_checkpoint_channel_mode
from tests.configs import write_config


def test_a_maintenance_process_freezes_delta_on_a_full_mode_config(tmp_path, sqlite_fixture_db):
    path = write_config(tmp_path / "config.yaml", sqlite_fixture_db, "full", 25)
    rt = DashboardRuntime.from_config(load_config(path), maintenance=True)
    assert (rt.mode, rt.snapshot_frequency, rt.maintenance) == ("delta", 25, True)
    assert frozen_checkpoint_channel_mode() == "delta"  # the process's own freeze, as LangGraph's reader sees it
    rt.check_drift()  # the file names full: not a drift for it


def test_it_drifts_on_a_cadence_change_only(tmp_path, sqlite_fixture_db):
    path = write_config(tmp_path / "config.yaml", sqlite_fixture_db, "full", 10)
    rt = DashboardRuntime.from_config(load_config(path), maintenance=True)
    write_config(path, sqlite_fixture_db, "delta", 10)
    rt.check_drift()  # full -> delta on disk: still what it froze
    write_config(path, sqlite_fixture_db, "full", 40)
    with pytest.raises(CheckpointModeReconfigurationError) as raised:
        rt.check_drift()
    assert (raised.value.setting, raised.value.frozen, raised.value.requested) == (
        "checkpoint_delta.snapshot_frequency", 10, 40)


def test_a_serving_process_still_drifts_on_mode(tmp_path, sqlite_fixture_db):
    path = write_config(tmp_path / "config.yaml", sqlite_fixture_db, "full", 10)
    rt = DashboardRuntime.from_config(load_config(path))
    assert (rt.mode, rt.maintenance) == ("full", False)
    write_config(path, sqlite_fixture_db, "delta", 10)
    with pytest.raises(CheckpointModeReconfigurationError):
        rt.check_drift()
