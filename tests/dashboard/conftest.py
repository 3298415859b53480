"""Dashboard test fixtures: a process runtime on a given database and mode, and personas.

Personas: ``staff`` (may browse), ``outsider`` (logged in, not staff), and
``anonymous``. ``runtime_for`` writes a real config.yaml and freezes the
(test-reset) process on it, exactly as a dashboard process does at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from django.test import Client

from dashboard.runtime import DashboardRuntime, install_runtime
from deerflow.config import load_config
from deerflow.config.database_config import DatabaseConfig


def write_config(path: Path, database: DatabaseConfig, mode: str, snapshot_frequency: int = 10) -> Path:
    """Write a DeerFlow-style config.yaml for ``database`` in ``mode``; returns its path."""
    block = {"backend": database.backend, "checkpoint_channel_mode": mode,
             "checkpoint_delta": {"snapshot_frequency": snapshot_frequency}}
    if database.backend == "sqlite":
        block["sqlite_dir"] = database.sqlite_dir
    if database.backend == "postgres":
        block["postgres_url"] = database.postgres_url
    path.write_text(yaml.safe_dump({"database": block}), encoding="utf-8")
    return path


@pytest.fixture
def runtime_for(tmp_path: Path) -> Iterator[Callable[..., DashboardRuntime]]:
    """Factory: ``runtime_for(database, mode, snapshot_frequency=10)`` installs a frozen runtime."""
    made: list[DashboardRuntime] = []

    def make(database: DatabaseConfig, mode: str, snapshot_frequency: int = 10) -> DashboardRuntime:
        from deerflow.runtime.checkpoint_mode import _reset_checkpoint_mode_freeze_for_tests

        _reset_checkpoint_mode_freeze_for_tests()
        path = write_config(tmp_path / f"config-{len(made)}.yaml", database, mode, snapshot_frequency)
        rt = DashboardRuntime.from_config(load_config(path))
        install_runtime(rt)
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.close()
    install_runtime(None)


@pytest.fixture
def staff_user(django_user_model):
    """A staff user named ``staff`` (password ``staff-pass``)."""
    return django_user_model.objects.create_user("staff", password="staff-pass", is_staff=True)


@pytest.fixture
def outsider_user(django_user_model):
    """A logged-in but non-staff user."""
    return django_user_model.objects.create_user("outsider", password="outsider-pass", is_staff=False)


@pytest.fixture
def staff_client(staff_user) -> Client:
    """A Django test client logged in as the staff persona."""
    client = Client()
    client.force_login(staff_user)
    return client


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)])
def fixture_backend(request) -> tuple[str, DatabaseConfig]:
    """``(backend name, database block)`` of the read-only real fixture, once per backend."""
    return request.param, request.getfixturevalue(f"{request.param}_fixture_db")

