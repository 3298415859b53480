"""``GET /healthz``: unauthenticated, data-free, no database; 503 when the process must be restarted."""

from __future__ import annotations

import pytest
from django.test import Client

from deerflow.config.database_config import DatabaseConfig

pytestmark = pytest.mark.django_db


def test_it_answers_anonymous_with_the_frozen_mode_and_no_data(sqlite_fixture_db, runtime_for,  # noqa: F811
                                                              django_assert_num_queries):
    runtime_for(sqlite_fixture_db, "delta", snapshot_frequency=7)
    with django_assert_num_queries(0):
        response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok mode=delta snapshot_frequency=7\n"
    assert response["Content-Type"].startswith("text/plain")
    assert "no-cache" in response["Cache-Control"]


def test_full_mode_names_no_cadence(sqlite_fixture_db, runtime_for):  # noqa: F811
    runtime_for(sqlite_fixture_db, "full")
    assert Client().get("/healthz").content == b"ok mode=full\n"


def test_it_never_touches_the_checkpoint_database(runtime_for):  # noqa: F811
    rt = runtime_for(DatabaseConfig(backend="postgres", postgres_url="postgresql://postgres@127.0.0.1:1/x"), "delta")
    assert Client().get("/healthz").status_code == 200
    assert rt._saver is None  # the saver was never opened


def test_config_drift_is_503_until_restart(sqlite_fixture_db, runtime_for):  # noqa: F811
    rt = runtime_for(sqlite_fixture_db, "delta")
    original = rt.config.path.read_text()
    rt.config.path.write_text(original.replace("checkpoint_channel_mode: delta", "checkpoint_channel_mode: full"))
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert b"restart required (checkpoint_channel_mode changed on disk)" in response.content
    rt.config.path.write_text(original)
    assert Client().get("/healthz").status_code == 200


def test_it_is_get_only(sqlite_fixture_db, runtime_for):  # noqa: F811
    runtime_for(sqlite_fixture_db, "delta")
    assert Client().post("/healthz").status_code == 405
