"""Absurd query parameters on every thread route, page and API: a 400 (or 404) with detail and hint, never a 500.

Negative, zero, huge and non-numeric limits; garbage, oversized and forged
cursors; NUL bytes; SQL in ids; oversized namespaces. The per-route tests in
``tests/dashboard`` check the common cases one by one; this sweep runs the
same table over all of them and checks that nothing was written.
"""

from __future__ import annotations

import base64

import pytest

from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

THREAD = "delta-f10-9t"
FORGED = base64.urlsafe_b64encode(b'["9999", "zzz", "extra"]').decode().rstrip("=")
LIST_CASES = [
    {"limit": "-1"}, {"limit": "0"}, {"limit": str(10**30)}, {"limit": "1e3"}, {"limit": "NaN"},
    {"cursor": "x" * 5000}, {"cursor": "garbage!"}, {"cursor": FORGED}, {"cursor": "\x00"},
    {"q": "\x00"}, {"q": "q" * 2001}, {"mode": "FULL"}, {"thread_class": "' OR 1=1 --"},
]
HISTORY_CASES = [
    {"limit": "-5"}, {"limit": str(10**30)}, {"limit": "0x10"}, {"before": "b" * 201}, {"before": "\x00"},
    {"checkpoint_ns": "\x00"}, {"checkpoint_ns": "n" * 2001},
]
STATE_CASES = [{"checkpoint_id": "x" * 201}, {"checkpoint_id": "a\x00b"}, {"checkpoint_ns": "n" * 2001}]
NOT_FOUND_CASES = [  # well-formed but naming nothing: 404
    (f"/api/threads/{THREAD}/state", {"checkpoint_id": "'; DROP TABLE checkpoints; --"}),
    (f"/api/threads/{THREAD}/history", {"before": "../../etc/passwd"}),
    (f"/api/threads/{THREAD}/history", {"checkpoint_ns": "no-such-namespace"}),
]


def _cases():
    for params in LIST_CASES:
        yield "/api/threads", params
        yield "/threads/", params
    for params in HISTORY_CASES:
        yield f"/api/threads/{THREAD}/history", params
        yield f"/history/{THREAD}/", params
    for params in STATE_CASES:
        yield f"/api/threads/{THREAD}/state", params
        yield f"/threads/{THREAD}/", params


CASES = list(_cases())


@pytest.fixture
def served(sqlite_fixture_db, runtime_for):
    return runtime_for(sqlite_fixture_db, "delta")


@pytest.mark.parametrize(("url", "params"), CASES, ids=[f"{u}?{'&'.join(p)}" for u, p in CASES])
def test_absurd_parameters_answer_400_with_a_hint(served, staff_client, url, params):
    response = staff_client.get(url, params)
    assert response.status_code == 400, (url, params, response.status_code)
    if url.startswith("/api/"):
        body = response.json()
        assert body["detail"] and body["hint"]
        assert next(iter(params)) in body["detail"]
    else:
        (card,) = parse(response.content).find_all("section", cls="error-card")
        assert "HTTP 400" in card.text and "What to do" in card.text


@pytest.mark.parametrize(("url", "params"), NOT_FOUND_CASES)
def test_well_formed_values_that_name_nothing_answer_404(served, staff_client, url, params):
    response = staff_client.get(url, params)
    assert response.status_code == 404
    assert set(response.json()) >= {"detail", "hint"}


def test_the_sweep_wrote_nothing(served, staff_client, sqlite_fixture_db):
    import sqlite3
    from pathlib import Path

    def count() -> tuple[int, int]:
        with sqlite3.connect(Path(sqlite_fixture_db.sqlite_dir) / "deerflow.db") as conn:
            return (conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0],
                    conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0])

    before = count()
    for url, params in CASES + NOT_FOUND_CASES:
        staff_client.get(url, params)
    assert count() == before
