"""A frozen Celery worker is registered through ``dashboard.celery.worker_frozen`` (the fleet connects to it)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from dashboard.celery import worker_frozen
from dashboard.fleet.models import ProcessRecord
from dashboard.fleet.registry import register_worker


@pytest.mark.django_db
def test_a_frozen_worker_is_registered_and_stopped_through_the_signal(runtime_for, sqlite_fixture_db, settings):
    settings.DASHBOARD_HEARTBEAT_S = 3600  # no beat during the test: only the registration and the stop
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    app = SimpleNamespace()
    answers = dict(worker_frozen.send(sender="celery@test", runtime=rt, queues=["checkpoints.delta", "dashboard"],
                                      app=app))
    stop = answers[register_worker]  # FleetConfig.ready connected the fleet's receiver
    row = ProcessRecord.objects.get(instance_id=app.deerflow_instance_id)
    assert (row.role, row.pid, row.mode, row.snapshot_frequency) == ("worker", os.getpid(), "delta", 10)
    assert row.queues == ["checkpoints.delta", "dashboard"] and row.stopped_at is None
    stop()
    row.refresh_from_db()
    assert row.stopped_at is not None
