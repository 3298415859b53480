"""Fixtures for the jobs app: a small writable checkpoint database, runtimes, and personas.

Personas: ``manager`` (staff with ``jobs.manage_conversions``), ``viewer``
(staff without it), ``outsider`` (logged in, not staff), anonymous.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import run_inline
from dashboard.runtime import DashboardRuntime
from deerflow.config.database_config import DatabaseConfig

#: Small threads of the real fixture kept in :func:`small_db` (seconds to convert, not minutes).
SMALL_THREADS = ["delta-f10-1t", "delta-f10-9t", "delta-f10-10t", "delta-f10-fork", "markerless-delta-f10-13t",
                 "migrated-full20-delta20", "full-short-3t", "full-rollback"]
DELTA_SMALL = [t for t in SMALL_THREADS if not t.startswith("full-")]


def shrink(database: DatabaseConfig, keep: list[str]) -> DatabaseConfig:
    """Delete every thread but ``keep`` from a private SQLite copy (so filters stay fast)."""
    marks = ",".join("?" * len(keep))
    with sqlite3.connect(Path(database.sqlite_dir) / "deerflow.db") as conn:
        for table in ("checkpoints", "writes"):
            conn.execute(f"DELETE FROM {table} WHERE thread_id NOT IN ({marks})", keep)
    return database


@pytest.fixture
def small_db(sqlite_fixture_db_rw: DatabaseConfig) -> DatabaseConfig:
    """A writable copy of the fixture SQLite holding only :data:`SMALL_THREADS`."""
    return shrink(sqlite_fixture_db_rw, SMALL_THREADS)


@pytest.fixture
def delta_rt(runtime_for, small_db) -> DashboardRuntime:
    """This process frozen in delta mode on :func:`small_db` (what a delta worker is)."""
    return runtime_for(small_db, "delta")


def _user(django_user_model, name: str, *, staff: bool, manage: bool):
    user = django_user_model.objects.create_user(name, password=f"{name}-pass", is_staff=staff)
    if manage:
        user.user_permissions.add(Permission.objects.get(codename="manage_conversions"))
    return user


@pytest.fixture
def manager(django_user_model):
    """Staff with ``jobs.manage_conversions``."""
    return _user(django_user_model, "manager", staff=True, manage=True)


@pytest.fixture
def viewer(django_user_model):
    """Staff without the permission: may look, may not launch."""
    return _user(django_user_model, "viewer", staff=True, manage=False)


@pytest.fixture
def manager_client(manager) -> Client:
    client = Client()
    client.force_login(manager)
    return client


@pytest.fixture
def viewer_client(viewer) -> Client:
    client = Client()
    client.force_login(viewer)
    return client


@pytest.fixture
def finished_job(delta_rt) -> Callable[..., ConversionJob]:
    """Factory: create a job through the service and run it inline to its end."""
    from dashboard.jobs import services

    def make(kind: str = "dry_run", selection: dict | None = None, **options) -> ConversionJob:
        job = services.create_job(None, kind, selection, launched_by="test", **options)
        return run_inline(job)

    return make
