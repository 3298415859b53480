"""``manage.py seed_threads``, ``manage.py refresh_inventory`` and the periodic Celery task, on a real database."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from deerflow import inventory
from deerflow.config.database_config import DatabaseConfig
from deerflow.savers import open_checkpointer
from tests.configs import write_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def database(tmp_path, settings, runtime_for) -> DatabaseConfig:
    db = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data"))
    settings.DEER_FLOW_CONFIG_PATH = str(write_config(tmp_path / "config.yaml", db, "delta", 4))
    return db


def test_seed_threads_writes_and_summarizes(database, runtime_for):
    out = StringIO()
    call_command("seed_threads", "--threads", "30", "--turns-min", "2", "--turns-max", "5", "--mode", "delta",
                 "--snapshot-frequency", "4", "--seed", "cmd", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["seed"]["threads"] == 30 and report["summary"]["kind"] == "full"
    assert report["summary"]["threads"] == 30
    with open_checkpointer(database) as saver:
        counts = inventory.class_counts(saver, refresh=False)
    assert counts["delta"] == 30


def test_seed_threads_rejects_a_bad_plan(database):
    with pytest.raises(CommandError, match="turns_min <= turns_max"):
        call_command("seed_threads", "--threads", "3", "--turns-min", "5", "--turns-max", "2")


def test_refresh_inventory_command_and_task(database, runtime_for):
    call_command("seed_threads", "--threads", "5", "--turns-max", "3", "--mode", "mixed", "--seed", "t",
                 stdout=StringIO())
    runtime_for(database, "delta", 4)
    out = StringIO()
    call_command("refresh_inventory", "--full", "--json", stdout=out)
    assert json.loads(out.getvalue())["kind"] == "full"
    out = StringIO()
    call_command("refresh_inventory", stdout=out)
    assert out.getvalue().startswith("Thread summary: incremental refresh")
    from dashboard.threads.tasks import refresh_summary

    assert refresh_summary.apply(kwargs={"full": True}).get()["threads"] == 5
    assert refresh_summary.apply().get()["kind"] == "incremental"
