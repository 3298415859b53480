"""Issue 2's acceptance sweep: every checkpoint of every manifest thread through ``/api/threads/<id>/state``.

Each sweep is cut into :data:`tests.fixtures_real.SWEEP_SHARDS` parts, every fourth checkpoint each (one
test per part, so pytest-xdist runs them side by side).

On both the restored Postgres dump and the SQLite file, in both modes:

* delta mode: the canonical digest of the returned messages equals the
  manifest's ``messages_sha256`` for every checkpoint, except where the
  replay rule knowingly departs from LangGraph's reader (the manifest's
  reader; issue 13, item 4: the input child of a fork and its descendants,
  :func:`oracle.fork_input_checkpoints`): there the answer carries a
  ``reader_disagreement`` finding whose ``langgraph_message_count`` is the
  manifest's count, and the messages shown are the live run's where the
  manifest recorded them; everywhere else no such finding;
* full mode: each checkpoint answers as the manifest's ``full_mode_accessor``
  says, except that a raw ``_DeltaSnapshot`` (DeerFlow's locked reader) and a
  lineage with delta evidence (issue 3, item 6) are refused with the exact 409.

Expected answers come from :mod:`tests.dashboard.oracle`.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest

from tests import fixtures_real
from tests.dashboard import oracle

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

MAX_REPORTED = 25


def _state_url(expected: oracle.Expected) -> str:
    query = urlencode({"checkpoint_id": expected.checkpoint_id, "checkpoint_ns": expected.checkpoint_ns})
    return f"/api/threads/{quote(expected.thread_id, safe='/')}/state?{query}"


def _check(client, expected: oracle.Expected) -> str | None:
    """``None`` when the response is right, else a one-line failure description."""
    response = client.get(_state_url(expected))
    if response.status_code != expected.status:
        return f"{expected.describe()}: got HTTP {response.status_code} {response.content[:300]!r}"
    body = response.json()
    if expected.status == 409:
        if body.get("detail") != oracle.mismatch_detail(expected.thread_id) or not body.get("hint"):
            return f"{expected.describe()}: wrong 409 body {body!r}"
        return None
    if body["checkpoint_id"] != expected.checkpoint_id or body["checkpoint_ns"] != expected.checkpoint_ns:
        return f"{expected.describe()}: answered for {body['checkpoint_id']} ns={body['checkpoint_ns']!r}"
    if tuple(body["next"]) != expected.next:
        return f"{expected.describe()}: next {body['next']!r}, manifest {list(expected.next)!r}"
    messages = body["values"].get("messages") or []
    digest = oracle.digest_from_json(messages)
    flags = [f for f in body.get("findings", []) if f["kind"] == "reader_disagreement"]
    if expected.reader_disagreement:
        if [(f["reason"], f["langgraph_message_count"], f["message_count"]) for f in flags] != [
                ("fork_input", expected.message_count, len(messages))]:
            return f"{expected.describe()}: expected one fork_input reader_disagreement, got {flags!r}"
        if expected.live_messages_sha256 not in (None, digest):
            return f"{expected.describe()}: shows {digest}, the live run had {expected.live_messages_sha256}"
        return None
    if flags:
        return f"{expected.describe()}: unexpected reader_disagreement {flags!r}"
    if digest != expected.messages_sha256 or len(messages) != expected.message_count:
        return (f"{expected.describe()}: got {len(messages)} messages sha256 {digest}, "
                f"manifest {expected.message_count} messages sha256 {expected.messages_sha256}")
    return None


def _sweep(client, backend: str, mode: str, shard: int) -> None:
    """Every :data:`tests.fixtures_real.SWEEP_SHARDS`-th checkpoint of the manifest, from the ``shard``-th.

    Round-robin over the manifest's checkpoints (each request stands alone), so each part holds a
    share of every thread, the 1,200-checkpoint one included, and the parts take about equally long.
    """
    failures: list[str] = []
    statuses = {200: 0, 409: 0}
    total = every = 0
    for every, expected in enumerate(oracle.expected_answers(backend, mode), start=1):
        if (every - 1) % fixtures_real.SWEEP_SHARDS != shard:
            continue
        total += 1
        statuses[expected.status] += 1
        problem = _check(client, expected)
        if problem:
            failures.append(problem)
    assert every == sum(len(t["backends"][backend]["checkpoints"]) for t in oracle.threads()) == 3268
    assert total == len(range(shard, every, fixtures_real.SWEEP_SHARDS)) > 0
    assert not failures, (
        f"{len(failures)} of {total} checkpoints answered wrongly on {backend} in {mode} mode "
        f"(expected {statuses}):\n" + "\n".join(failures[:MAX_REPORTED])
    )


BACKEND_FIXTURES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


SHARDS = [pytest.param(i, id=f"part{i}") for i in range(fixtures_real.SWEEP_SHARDS)]


@pytest.mark.parametrize("shard", SHARDS)
@pytest.mark.parametrize("backend", BACKEND_FIXTURES)
def test_delta_mode_every_checkpoint_matches_manifest_digest(backend, shard, request, runtime_for, staff_client):
    database = request.getfixturevalue(f"{backend}_fixture_db")
    runtime_for(database, "delta")
    _sweep(staff_client, backend, "delta", shard)


@pytest.mark.parametrize("shard", SHARDS)
@pytest.mark.parametrize("backend", BACKEND_FIXTURES)
def test_full_mode_every_checkpoint_answers_as_full_mode_accessor_or_409(backend, shard, request, runtime_for,
                                                                          staff_client):
    database = request.getfixturevalue(f"{backend}_fixture_db")
    runtime_for(database, "full")
    _sweep(staff_client, backend, "full", shard)

