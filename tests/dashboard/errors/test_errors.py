"""Error mapping: 404s, config drift (503), and no plain 500 for any mode conflict on any route.

Spec, "HTTP error mapping": a mode mismatch is 409 with ``Thread <id>: <message>``;
a reconfiguration is 503 with the restart-required detail. Issue 3, item 5:
config.yaml edited under a running process is a 503 with a hint naming the
frozen value, the value on disk, and the restart.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from deerflow.errors import RECONFIGURATION_MESSAGE, SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE
from tests.dashboard import oracle

pytestmark = pytest.mark.django_db

UNKNOWN_CHECKPOINT = "1f000000-0000-6000-8000-000000000000"


def _q(thread_id: str) -> str:
    return quote(thread_id, safe="/")


def thread_routes(thread_id: str) -> dict[str, str]:
    """Every route that reads one thread, by name."""
    return {
        "api-state": f"/api/threads/{_q(thread_id)}/state",
        "api-history": f"/api/threads/{_q(thread_id)}/history",
        "page-detail": f"/threads/{_q(thread_id)}/",
        "page-history": f"/history/{_q(thread_id)}/",
    }


def _is_json(response) -> bool:
    return response["Content-Type"].startswith("application/json")


def assert_error(response, status: int, detail: str | None = None) -> None:
    """JSON routes answer ``{"detail", "hint"}``; HTML routes show both in the error card."""
    assert response.status_code == status, response.content[:400]
    if _is_json(response):
        body = response.json()
        assert body["hint"]
        if detail is not None:
            assert body["detail"] == detail
    else:
        html = response.content.decode("utf-8")
        assert f"HTTP {status}" in html
        assert 'class="hint"' in html
        if detail is not None:
            assert f'<p class="detail" id="error-detail">{detail}</p>' in html


# -- 404 ----------------------------------------------------------------------

@pytest.mark.parametrize("route", ["api-state", "api-history", "page-detail", "page-history"])
def test_unknown_thread_is_404(fixture_backend, runtime_for, staff_client, route):
    _backend, database = fixture_backend
    for mode in ("full", "delta"):
        runtime_for(database, mode)
        response = staff_client.get(thread_routes("no-such-thread")[route])
        assert_error(response, 404)
        text = response.content.decode("utf-8")
        assert "no-such-thread" in text


@pytest.mark.parametrize("route", ["api-state", "page-detail"])
def test_unknown_checkpoint_is_404(fixture_backend, runtime_for, staff_client, route):
    _backend, database = fixture_backend
    runtime_for(database, "delta")
    response = staff_client.get(thread_routes("delta-f10-9t")[route], {"checkpoint_id": UNKNOWN_CHECKPOINT})
    assert_error(response, 404)
    assert UNKNOWN_CHECKPOINT in response.content.decode("utf-8")


def test_checkpoint_of_another_thread_is_404(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    other = oracle.root_checkpoints("delta-f10-10t", "sqlite")[0]["checkpoint_id"]
    response = staff_client.get(thread_routes("delta-f10-9t")["api-state"], {"checkpoint_id": other})
    assert_error(response, 404)


def test_404_body_is_detail_and_hint(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "delta")
    body = staff_client.get(thread_routes("nope")["api-state"]).json()
    assert set(body) >= {"detail", "hint"}
    assert body["detail"] == "Thread 'nope' has no checkpoints in this database."


# -- 409 on every route, never a 500 --------------------------------------------

@pytest.mark.parametrize("mode", ["full", "delta"])
@pytest.mark.parametrize("thread_id", ["delta-f10-11t", "markerless-delta-f10-13t", "migrated-full20-delta20"])
def test_no_route_answers_500_for_a_delta_thread(fixture_backend, runtime_for, staff_client, mode, thread_id):
    _backend, database = fixture_backend
    runtime_for(database, mode)
    routes = thread_routes(thread_id)
    for name, url in routes.items():
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = staff_client.get(url, **headers)
            if mode == "delta":
                assert response.status_code == 200, (name, response.content[:300])
            else:
                assert_error(response, 409, oracle.mismatch_detail(thread_id))
    for url in ("/api/threads", "/threads/"):
        assert staff_client.get(url, {"q": thread_id}).status_code == 200


def test_htmx_error_is_a_fragment(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "full")
    response = staff_client.get(thread_routes("delta-f10-1t")["page-detail"], HTTP_HX_REQUEST="true")
    html = response.content.decode("utf-8")
    assert response.status_code == 409
    assert "<html" not in html
    assert oracle.mismatch_detail("delta-f10-1t") in html


def test_full_mode_reads_full_threads_on_every_route(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "full")
    for name, url in thread_routes("full-short-3t").items():
        assert staff_client.get(url).status_code == 200, name


# -- 503: config drift ----------------------------------------------------------

def _rewrite(path: Path, **changes) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in changes.items():
        if key == "snapshot_frequency":
            data["database"]["checkpoint_delta"] = {"snapshot_frequency": value}
        else:
            data["database"][key] = value
    path.write_text(yaml.safe_dump(data), encoding="utf-8")


DRIFTS = [
    pytest.param("full", {"checkpoint_channel_mode": "delta"}, RECONFIGURATION_MESSAGE, ("'full'", "'delta'"),
                 id="full-to-delta"),
    pytest.param("delta", {"checkpoint_channel_mode": "full"}, RECONFIGURATION_MESSAGE, ("'delta'", "'full'"),
                 id="delta-to-full"),
    pytest.param("delta", {"snapshot_frequency": 100}, SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE, ("10", "100"),
                 id="cadence"),
]


@pytest.mark.parametrize(("mode", "change", "detail", "values"), DRIFTS)
def test_config_drift_is_503_until_restored(fixture_backend, runtime_for, staff_client, mode, change, detail, values):
    _backend, database = fixture_backend
    rt = runtime_for(database, mode)
    path = Path(rt.config.path)
    original = path.read_text(encoding="utf-8")
    thread_id = "full-tools-30t"
    routes = thread_routes(thread_id)
    for url in routes.values():
        assert staff_client.get(url).status_code == 200

    _rewrite(path, **change)
    frozen, on_disk = values
    for name, url in routes.items():
        response = staff_client.get(url)
        assert_error(response, 503, detail)
        text = response.content.decode("utf-8")
        hint = response.json()["hint"] if _is_json(response) else text
        hint = hint.replace("&#x27;", "'")
        assert f"frozen at {frozen}" in hint, name
        assert f"value on disk in config.yaml is now {on_disk}" in hint, name
        assert "Restart" in hint, name
    # The list is metadata only and keeps working.
    assert staff_client.get("/api/threads").status_code == 200

    path.write_text(original, encoding="utf-8")
    for name, url in routes.items():
        assert staff_client.get(url).status_code == 200, name


def test_cadence_edit_in_full_mode_is_not_a_drift(sqlite_fixture_db, runtime_for, staff_client):
    """A full-mode process compiles no delta channel, so the cadence does not matter to it."""
    rt = runtime_for(sqlite_fixture_db, "full")
    _rewrite(Path(rt.config.path), snapshot_frequency=100)
    assert staff_client.get(thread_routes("full-short-3t")["api-state"]).status_code == 200


def test_unreadable_config_is_not_a_drift(sqlite_fixture_db, runtime_for, staff_client):
    """A broken file keeps the process on its frozen values (it is not asking for anything)."""
    rt = runtime_for(sqlite_fixture_db, "delta")
    Path(rt.config.path).write_text("database: [unbalanced", encoding="utf-8")
    assert staff_client.get(thread_routes("delta-f10-9t")["api-state"]).status_code == 200
    Path(rt.config.path).unlink()
    assert staff_client.get(thread_routes("delta-f10-9t")["api-state"]).status_code == 200
