"""Crafted keyset cursors: well-formed base64 JSON whose values the database cannot take answer 400, never a 500.

Cursors are unsigned base64url JSON (:func:`deerflow.inventory.encode_cursor`):
a made-up cursor of the right shape is accepted and only positions the page.
Anything else -- a number outside signed 64 bits (SQLite's INTEGER and
Postgres' bigint overflow), a float or boolean key, a string with a NUL
byte (Postgres text cannot hold one) or a lone surrogate (not UTF-8), the
wrong arity, another sort's cursor -- is the registry's ``invalid_cursor``
with its detail and hint, on both backends, on the page and the API.
"""

from __future__ import annotations

import base64
import json

import pytest

from benchmarks.naive_list import list_threads_naive
from deerflow import inventory
from deerflow.storage.savers import open_checkpointer
from tests.backends import BACKENDS
from tests.dashboard.html import parse

HINT = "Drop the cursor parameter to start from the first page."
INT64_MAX = 2**63 - 1


def crafted(value) -> str:
    """A cursor as a client could make one: base64url of any JSON, unpadded."""
    raw = json.dumps(value).encode() if not isinstance(value, bytes) else value
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


#: The bug report's cursor, verbatim.
REPORTED = "WyJieXRlcyIsIDEwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAsICJ4Il0"
BAD = {
    "bytes": [REPORTED, crafted(["bytes", 2**63, "x"]), crafted(["bytes", -(2**63) - 1, "x"]),
              crafted(["bytes", 1.5, "x"]), crafted(["bytes", True, "x"]), crafted(["bytes", "1", "x"]),
              crafted(["bytes", 1, 2]), crafted(["bytes", 1, "x\u0000y"]), crafted(["bytes", 1]),
              crafted(["bytes", 1, "x", "extra"]), crafted(["checkpoints", 1, "x"]), crafted({"bytes": 1}),
              crafted(b'["bytes", 1, "\\ud800"]'), crafted(["bytes", 1e400, "x"]), crafted(b"[" * 2000),
              crafted(["updated", 1, "x"]), crafted(["1f0", "x"])],
    "checkpoints": [crafted(["checkpoints", 10**30, "x"]), crafted(["checkpoints", 2**63, "x"]),
                    crafted(["bytes", 1, "x"])],
    "updated": [crafted(["a\u0000b", "x"]), crafted([1, "x"]), crafted(["a", "x", "y"]),
                crafted(b'["\\udfff", "x"]'), crafted(["bytes", 1, "x"])],
}
CASES = [(sort, cursor) for sort, cursors in BAD.items() for cursor in cursors]
IDS = [f"{sort}-{i}" for sort, cursors in BAD.items() for i in range(len(cursors))]


def test_the_reported_cursor_is_the_reported_value():
    padded = REPORTED + "=" * (-len(REPORTED) % 4)
    assert json.loads(base64.urlsafe_b64decode(padded)) == ["bytes", 10**30, "x"]


@pytest.mark.django_db
@pytest.mark.parametrize(("sort", "cursor"), CASES, ids=IDS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_crafted_cursor_answers_400_invalid_cursor_on_the_api(request, runtime_for, staff_client, backend,
                                                                  sort, cursor):
    runtime_for(request.getfixturevalue(f"{backend}_fixture_db"), "delta")
    response = staff_client.get("/api/threads", {"sort": sort, "cursor": cursor})
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == "invalid_cursor"
    assert (body["detail"].startswith("cursor is not valid")
            or f"cursor does not belong to sort={sort}" in body["detail"])
    assert body["hint"] == HINT


@pytest.mark.django_db
@pytest.mark.parametrize("sort", ["bytes", "checkpoints"])
def test_the_reported_cursor_answers_the_error_page_on_the_html_list(sqlite_fixture_db, runtime_for, staff_client,
                                                                     sort):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get("/threads/", {"sort": sort, "cursor": crafted([sort, 10**30, "x"])})
    assert response.status_code == 400
    (card,) = parse(response.content).find_all("section", cls="error-card")
    assert "invalid_cursor" in card.text and "cursor" in card.text and HINT in card.text


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_threads_rejects_crafted_cursors_on_both_backends(request, backend):
    database = request.getfixturevalue(f"{backend}_fixture_db")
    with open_checkpointer(database) as saver:
        for sort, cursor in CASES:
            with pytest.raises(inventory.InvalidCursorError):
                inventory.list_threads(saver, sort=sort, cursor=cursor, limit=5)
        for cursor in BAD["updated"]:
            with pytest.raises(inventory.InvalidCursorError):
                list_threads_naive(saver, cursor=cursor, limit=5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_made_up_well_formed_cursor_positions_the_page(request, backend):
    """Cursors are not signed: one with in-range values is a position like any other (README)."""
    database = request.getfixturevalue(f"{backend}_fixture_db")
    with open_checkpointer(database) as saver:
        for sort in ("bytes", "checkpoints"):
            everything, _ = inventory.list_threads(saver, sort=sort, limit=1000)
            for key in (INT64_MAX, -(2**63), 0):
                page, _ = inventory.list_threads(saver, sort=sort, cursor=crafted([sort, key, "x"]), limit=1000)
                key_of = (lambda s: s.bytes_total) if sort == "bytes" else (lambda s: s.checkpoint_count)
                assert [s.thread_id for s in page] == [s.thread_id for s in everything
                                                       if (key_of(s), s.thread_id) < (key, "x")]
        page, _ = inventory.list_threads(saver, cursor=crafted(["zzzz", "x"]), limit=1000)
        assert len(page) == len(inventory.list_threads(saver, limit=1000)[0])
