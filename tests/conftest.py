"""Shared fixtures: the real DeerFlow data on SQLite and Postgres (defined in :mod:`tests.backends`), a clean
mode freeze, frozen dashboard runtimes, and personas."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.database_config import DatabaseConfig
from deerflow.runtime.checkpoint_mode import _reset_checkpoint_mode_freeze_for_tests
from tests import fixtures_real

# The real fixture on each backend, for every test (tests/backends.py; ``db`` and ``fixture_db`` are not).
from tests.backends import (  # noqa: F401 - fixtures
    empty_postgres_db,
    fixture_backend,
    postgres_fixture_db,
    postgres_fixture_db_rw,
    sqlite_fixture_db,
    sqlite_fixture_db_rw,
    sqlite_fixture_dir,
)
from tests.configs import write_config

#: Modules whose module-scoped fixtures start servers or workers (a dashboard and chromium, Celery workers, the
#: crash trials' zygote): under ``--dist loadgroup`` each runs on one worker, so the fixture starts once.
#: Without a group, xdist deals their tests out one by one and each worker starts the fixture again.
MODULE_GROUPS = ("tests/browser/", "tests/integration/test_celery_worker.py", "tests/reliability/test_crash_trials.py")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the groups to tag the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``), group the tests that must share a worker.

    * Every ``rabbitmq`` test runs on one worker, one after another. Each such test has its own virtual host,
      but ``consumer_timeout`` is a server-wide RabbitMQ setting that tests/dashboard/jobs/test_worker_brokers.py
      lowers to seconds while its time-limit test runs: a RabbitMQ worker of a concurrent test would have its
      channel closed under it.
    * The tests of each :data:`MODULE_GROUPS` module run on one worker (their module fixtures start once).

    Everything else is isolated per test or per worker (scratch Postgres databases and RabbitMQ vhosts named
    by uuid, a claimed empty Redis db, ports from the worker's own block, ``var/test-<worker>``; see
    tests/settings.py and tests/integration/helpers.py). tests/test_xdist_groups.py checks that the groups
    reach xdist's scheduler.
    """
    for item in items:
        if item.get_closest_marker("rabbitmq"):
            item.add_marker(pytest.mark.xdist_group("rabbitmq-server"))
            continue
        module = item.nodeid.split("::", 1)[0]
        if any(module.startswith(prefix) for prefix in MODULE_GROUPS):
            item.add_marker(pytest.mark.xdist_group(f"module:{module}"))


@pytest.fixture(autouse=True)
def _fresh_mode_freeze() -> Iterator[None]:
    """Each test starts with an unfrozen process, as a fresh DeerFlow process would."""
    _reset_checkpoint_mode_freeze_for_tests()
    yield
    _reset_checkpoint_mode_freeze_for_tests()


class _DrainingExecutor(ThreadPoolExecutor):
    """The live-check refresher for the whole test session: it remembers what was submitted, so each test can wait
    for every refresh (its own, or one a fixture started around it) before the next test's cache is used."""

    def __init__(self) -> None:
        super().__init__(max_workers=2, thread_name_prefix="live-state-test")
        self._lock = threading.Lock()
        self._futures: list[Future] = []

    def submit(self, fn, /, *args, **kwargs) -> Future:  # noqa: D102 - see the class docstring
        future = super().submit(fn, *args, **kwargs)
        with self._lock:
            self._futures.append(future)
        return future

    def drain(self) -> None:
        """Wait until every refresh submitted so far (and any they submit) has finished."""
        while True:
            with self._lock:
                pending, self._futures = self._futures, []
            if not pending:
                return
            wait(pending)


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Each test starts with an empty Django cache (the fleet banners are cached per process), and every background
    refresh of a live check (:mod:`dashboard.fleet.recent`) has finished before it and after it: a refresh never
    lands in another test's cache. The refresher is replaced once for the session (never restored), so no refresh
    started between two tests escapes to the module's own executor."""
    from django.core.cache import cache

    from dashboard.fleet import recent

    if not isinstance(recent._refresher, _DrainingExecutor):
        recent._refresher = _DrainingExecutor()
    refresher = recent._refresher
    refresher.drain()
    cache.clear()
    yield
    refresher.drain()


def register_live_worker(name: str = "worker@tests:1", **fields: Any) -> Any:
    """A live dashboard worker's registry row (delta, consuming ``checkpoints.delta``), as its heartbeat leaves it."""
    from django.utils import timezone

    from dashboard.fleet.models import ProcessRecord

    now = timezone.now()
    values = {"role": "worker", "name": name, "host": "tests", "pid": 1, "started_at": now, "last_heartbeat": now,
              "mode": "delta", "snapshot_frequency": 10, "queues": ["dashboard", "checkpoints.delta"], **fields}
    return ProcessRecord.objects.update_or_create(instance_id=name, defaults=values)[0]


@pytest.fixture(autouse=True)
def live_maintenance_worker(request: pytest.FixtureRequest) -> Any:
    """For a test that uses Django's database: a live dashboard worker is registered, as in a running deployment.

    A Celery job is refused at launch while no live worker can run it (:mod:`dashboard.jobs.admission`);
    the job tests run their jobs inline as such a worker would. A test about the registry itself overrides
    this fixture (``tests/dashboard/fleet/conftest.py``), as does a test of the refusal.
    """
    uses_db = request.node.get_closest_marker("django_db") is not None or bool(
        {"db", "transactional_db", "django_db_setup"} & set(request.fixturenames))
    if not uses_db or "live_server" in request.fixturenames:
        return None
    request.getfixturevalue("_django_db_helper")
    return register_live_worker()


@pytest.fixture(scope="session")
def manifest() -> dict:
    """The fixture manifest (the oracle)."""
    return fixtures_real.load_manifest()


@pytest.fixture
def runtime_for(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Factory: ``runtime_for(database, mode="delta", snapshot_frequency=10)`` installs a frozen dashboard runtime.

    Writes a real config.yaml and freezes the (test-reset) process on it,
    exactly as a dashboard process does at start-up; closes every runtime and
    uninstalls it afterwards.
    """
    from dashboard.runtime import DashboardRuntime, install_runtime
    from deerflow.config import load_config

    made: list[DashboardRuntime] = []

    def make(database: DatabaseConfig, mode: str = "delta", snapshot_frequency: int = 10) -> DashboardRuntime:
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


# -- personas: staff (may browse), viewer (staff, no jobs permission), manager (staff with
# jobs.manage_conversions), outsider (logged in, not staff); anonymous is a bare Client().

def _user(django_user_model: Any, name: str, *, staff: bool, manage: bool = False) -> Any:
    user = django_user_model.objects.create_user(name, password=f"{name}-pass", is_staff=staff)
    if manage:
        from django.contrib.auth.models import Permission

        user.user_permissions.add(Permission.objects.get(codename="manage_conversions"))
    return user


def _logged_in(user: Any) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def staff_user(django_user_model):
    """A staff user named ``staff`` (password ``staff-pass``)."""
    return _user(django_user_model, "staff", staff=True)


@pytest.fixture
def outsider_user(django_user_model):
    """A logged-in but non-staff user named ``outsider``."""
    return _user(django_user_model, "outsider", staff=False)


@pytest.fixture
def manager(django_user_model):
    """Staff with ``jobs.manage_conversions`` (may launch and act on jobs)."""
    return _user(django_user_model, "manager", staff=True, manage=True)


@pytest.fixture
def viewer(django_user_model):
    """Staff without the permission: may look, may not launch."""
    return _user(django_user_model, "viewer", staff=True)


@pytest.fixture
def staff_client(staff_user):
    """A Django test client logged in as ``staff`` (CSRF checks off, as the test client defaults)."""
    return _logged_in(staff_user)


@pytest.fixture
def manager_client(manager):
    """A Django test client logged in as ``manager``."""
    return _logged_in(manager)


@pytest.fixture
def viewer_client(viewer):
    """A Django test client logged in as ``viewer``."""
    return _logged_in(viewer)
