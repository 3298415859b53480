"""The heartbeat thread's log: a locked or unreachable registry database is one warning line, not a traceback.

A web process on SQLite meets ``database is locked`` now and then (a writer
holds the file); the next beat retries and succeeds. Unexpected errors keep
their traceback.
"""

from __future__ import annotations

import logging

import pytest
from django.db import utils as db_utils

from dashboard.fleet import registry
from dashboard.fleet.models import ProcessRecord

pytestmark = pytest.mark.django_db


@pytest.fixture
def registration(sqlite_fixture_db, runtime_for) -> registry.Registration:
    return registry.Registration(runtime_for(sqlite_fixture_db, "delta"), "web", None, 15.0)


def _failing_once(monkeypatch, exc: Exception) -> None:
    real = registry.save_facts
    calls = []

    def save_facts(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise exc
        return real(*args, **kwargs)

    monkeypatch.setattr(registry, "save_facts", save_facts)


@pytest.mark.parametrize("exc", [db_utils.OperationalError("database is locked"),
                                 db_utils.InterfaceError("connection already closed\nsecond line")])
def test_a_transient_failure_logs_one_warning_line_and_the_recovery(registration, monkeypatch, caplog, exc):
    _failing_once(monkeypatch, exc)
    with caplog.at_level(logging.INFO, logger="dashboard.fleet"):
        assert registration.beat_in_background() is False
        assert registration.beat_in_background() is True
    failed, recovered = caplog.records
    first_line = str(exc).splitlines()[0]
    assert failed.levelno == logging.WARNING and failed.exc_info is None
    assert failed.getMessage() == f"heartbeat failed ({type(exc).__name__}: {first_line}); retrying in 15 s"
    assert "\n" not in failed.getMessage()
    assert recovered.levelno == logging.INFO and recovered.getMessage() == "heartbeat recovered after 1 failed beat"
    assert ProcessRecord.objects.filter(instance_id=registration.instance_id).exists()


def test_an_unexpected_failure_keeps_its_traceback(registration, monkeypatch, caplog):
    _failing_once(monkeypatch, KeyError("role"))
    with caplog.at_level(logging.INFO, logger="dashboard.fleet"):
        assert registration.beat_in_background() is False
    (failed,) = caplog.records
    assert failed.levelno == logging.ERROR and failed.getMessage() == "heartbeat failed"
    assert failed.exc_info and failed.exc_info[0] is KeyError


def test_a_healthy_beat_logs_nothing(registration, caplog):
    with caplog.at_level(logging.INFO, logger="dashboard.fleet"):
        assert registration.beat_in_background() is True
        assert registration.beat_in_background() is True
    assert caplog.records == []
