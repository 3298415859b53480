"""``GET /jobs/workers`` and :func:`check_delta_workers`: is a delta-mode worker alive to run jobs?

The broadcast replies are the network boundary: a stand-in app answers
what workers would; a real filesystem broker with no worker, and an
unreachable Redis, are used as they are.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from celery import Celery

from dashboard.jobs import views
from dashboard.jobs.workers import check_delta_workers
from tests.integration.helpers import free_port

pytestmark = pytest.mark.django_db

DELTA = {"name": "checkpoints.delta"}
DASHBOARD = {"name": "dashboard"}


def _answering(replies: dict, driver: str = "redis"):
    inspect = SimpleNamespace(active_queues=lambda: replies)
    transport = SimpleNamespace(driver_type=driver)
    return SimpleNamespace(control=SimpleNamespace(inspect=lambda timeout: inspect),
                           connection_for_read=lambda: SimpleNamespace(transport=transport))


def test_a_delta_worker_is_ok():
    check = check_delta_workers(app=_answering({"d@h": [DASHBOARD, DELTA], "f@h": [DASHBOARD]}))
    assert (check.state, check.workers, check.others) == ("ok", ["d@h"], ["f@h"])


def test_only_full_workers_means_none_and_how_to_start_one():
    check = check_delta_workers(app=_answering({"f@h": [DASHBOARD, {"name": "checkpoints.full"}]}))
    assert check.state == "none" and "f@h" in check.detail
    assert "celery -A dashboard worker -Q dashboard" in check.hint and "whatever mode it names" in check.hint


def test_silence_on_redis_means_none():
    assert check_delta_workers(app=_answering({})).state == "none"


def test_silence_on_the_filesystem_broker_cannot_be_verified(tmp_path):
    folders = {k: str(tmp_path / k) for k in ("data_folder_in", "data_folder_out", "processed_folder",
                                              "control_folder")}
    for path in folders.values():
        (tmp_path / path).mkdir(exist_ok=True)
    folders["data_folder_out"] = folders["data_folder_in"]
    app = Celery("fs-test", broker="filesystem://", broker_transport_options=folders, set_as_current=False)
    check = check_delta_workers(timeout=0.2, app=app)
    assert check.state == "unknown" and "cannot confirm" in check.detail and "celery -A dashboard" in check.hint


def test_an_unreachable_broker_is_unknown_not_a_crash():
    app = Celery("down", broker=f"redis://127.0.0.1:{free_port()}/0", set_as_current=False)
    app.conf.broker_connection_timeout = 0.5
    app.conf.broker_connection_retry = False
    app.conf.broker_connection_max_retries = 0
    check = check_delta_workers(timeout=0.2, app=app)
    assert check.state == "unknown" and "Cannot reach the Celery broker" in check.detail


def test_the_fragment_shows_the_check(monkeypatch, viewer_client):
    monkeypatch.setattr(views, "recent_worker_check", lambda _age: check_delta_workers(app=_answering({})))
    body = viewer_client.get("/jobs/workers").content.decode()
    assert 'class="card workers workers-none"' in body and "No live worker can run this job." in body


@pytest.mark.django_db
def test_the_page_never_waits_for_the_workers(monkeypatch, viewer_client, settings):
    """Before any answer: the heartbeats' answer at once, the workers asked in the background; then theirs,
    with when it was made."""
    import time

    from django.core.cache import cache

    from dashboard.jobs import workers

    settings.DASHBOARD_LIVE_CHECK_MAX_AGE_S = 10
    asked: list[float] = []

    def slow_answer(timeout: float = 1.0, app=None) -> workers.WorkerCheck:
        asked.append(time.monotonic())
        time.sleep(0.5)
        return check_delta_workers(app=_answering({"d@h": [DASHBOARD, DELTA]}))

    monkeypatch.setattr(workers, "check_delta_workers", slow_answer)
    started = time.monotonic()
    body = viewer_client.get("/jobs/workers").content.decode()
    assert time.monotonic() - started < 0.45
    assert "From heartbeats: the workers are being asked now" in body
    deadline = time.monotonic() + 5
    while cache.get(workers.WORKER_CHECK_KEY) is None:
        assert time.monotonic() < deadline, "the background check never landed"
        time.sleep(0.02)
    body = viewer_client.get("/jobs/workers").content.decode()
    assert "workers-ok" in body and "d@h" in body and 'id="workers-checked-at"' in body and len(asked) == 1
