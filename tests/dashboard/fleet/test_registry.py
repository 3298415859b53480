"""dashboard.fleet.registry: register, heartbeat, stop; outside processes."""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest
import yaml
from django.db import OperationalError
from django.utils import timezone

from dashboard.fleet.models import ProcessRecord
from dashboard.fleet.registry import Registration, record_external, register, save_facts


def _facts(**overrides) -> dict:
    facts = {"role": "worker", "host": "host-1", "pid": 123, "mode": "delta", "snapshot_frequency": 10,
             "config_path": "/etc/config.yaml", "config_sha256": "a" * 64, "max_supersteps": 5000,
             "versions": {"langgraph": "1"}, "queues": ["dashboard"], "disk_sha256": "a" * 64,
             "disk_mode": "delta", "disk_snapshot_frequency": 10, "disk_error": ""}
    facts.update(overrides)
    return facts


@pytest.mark.django_db
def test_save_facts_creates_then_refreshes_one_row():
    started = timezone.now() - dt.timedelta(minutes=5)
    first = save_facts("inst-1", _facts(), started_at=started, interval_s=2.0)
    assert first.name == "worker@host-1:123" and first.started_at == started
    assert first.heartbeat_interval_s == 2.0 and first.stopped_at is None
    ProcessRecord.objects.filter(pk=first.pk).update(stopped_at=timezone.now())
    second = save_facts("inst-1", _facts(disk_snapshot_frequency=25), started_at=timezone.now(), interval_s=2.0)
    assert ProcessRecord.objects.count() == 1
    second.refresh_from_db()
    assert second.started_at == started  # kept from the first beat
    assert second.last_heartbeat > first.last_heartbeat
    assert second.stopped_at is None
    assert second.disk_snapshot_frequency == 25


@pytest.mark.django_db(transaction=True)
def test_registration_heartbeats_and_stops(runtime_for, sqlite_fixture_db):
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    registration = Registration(rt, "web", None, interval_s=0.2).start()
    try:
        row = ProcessRecord.objects.get(instance_id=registration.instance_id)
        assert (row.role, row.pid, row.mode, row.snapshot_frequency) == ("web", os.getpid(), "delta", 10)
        assert row.config_path == str(rt.config.path) and row.config_sha256 == rt.config.sha256
        assert row.max_supersteps == 5000 and "langgraph" in row.versions
        first_beat = row.last_heartbeat

        # The file on disk changes: the next beat records it, the frozen values stay.
        data = yaml.safe_load(rt.config.path.read_text())
        data["database"]["checkpoint_delta"]["snapshot_frequency"] = 25
        rt.config.path.write_text(yaml.safe_dump(data))

        def beaten() -> ProcessRecord | None:
            try:
                r = ProcessRecord.objects.get(pk=row.pk)
            except OperationalError:  # the heartbeat thread holds the shared-cache test table's lock: poll again
                return None
            return r if r.last_heartbeat > first_beat and r.disk_snapshot_frequency == 25 else None

        deadline = time.monotonic() + 10
        while (latest := beaten()) is None:
            assert time.monotonic() < deadline, "no heartbeat recorded the edited file"
            time.sleep(0.1)
        assert latest.snapshot_frequency == 10 and latest.stopped_at is None
    finally:
        registration.stop()
    row = ProcessRecord.objects.get(instance_id=registration.instance_id)
    assert row.stopped_at is not None
    stopped_beat = row.last_heartbeat
    time.sleep(0.6)
    assert ProcessRecord.objects.get(pk=row.pk).last_heartbeat == stopped_beat  # no beat after stop


@pytest.mark.django_db(transaction=True)
def test_forked_child_does_not_mark_the_parent_stopped(runtime_for, sqlite_fixture_db):
    # A prefork pool child inherits the parent's atexit hook; stop() must be a no-op there.
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    registration = register(rt, "worker", queues=["dashboard"], interval_s=30)
    assert registration is not None
    try:
        pid = os.fork()
        if pid == 0:  # child: report through the exit code whether stop() did anything
            registration.stop()
            os._exit(7 if registration._stop.is_set() else 0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert ProcessRecord.objects.get(instance_id=registration.instance_id).stopped_at is None
    finally:
        registration.stop()
    assert ProcessRecord.objects.get(instance_id=registration.instance_id).stopped_at is not None


@pytest.mark.django_db
def test_record_external_is_always_role_external():
    row = record_external({**_facts(role="web"), "instance_id": "outside-1", "heartbeat_interval_s": 60.0})
    assert row.role == "external" and row.name == "external@host-1:123" and row.heartbeat_interval_s == 60.0
    named = record_external({**_facts(), "instance_id": "outside-2", "name": "gateway-1"})
    assert named.name == "gateway-1" and named.heartbeat_interval_s == 15.0
