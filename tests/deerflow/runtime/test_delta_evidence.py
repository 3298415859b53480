"""One delta-evidence definition, two readings: Python's :func:`shows_delta` and the dialect's SQL agree.

On every checkpoint of the real fixture (both backends) and on crafted metadata written through
LangGraph's own savers: markers other than ``"delta"``, counters only, counters of another channel,
a ``null`` counter, LangGraph.js's ``delta_writes_versioned``, snapshots without counters.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from deerflow.runtime.checkpoint_mode import checkpoint_metadata_uses_delta
from deerflow.runtime.delta_evidence import (
    ANY_COUNTERS,
    CHECKPOINT_MODE_METADATA_KEY,
    COUNTERS,
    COUNTERS_METADATA_KEY,
    DELTA_EVIDENCE,
    MARKER,
    PRUNE_REFUSES,
    VERSIONED,
    prune_refuses,
    shows_delta,
)
from deerflow.storage import Dialect, open_checkpointer, reader_for
from tests.backends import BACKENDS, fresh_database

MARK, COUNT = CHECKPOINT_MODE_METADATA_KEY, COUNTERS_METADATA_KEY

#: (case id, metadata, delta evidence?) -- the expected value is the rule stated by hand: DeerFlow's marker
#: and counters, and LangGraph.js's key as LangGraph's own prune reads it (presence).
CRAFTED: list[tuple[str, dict[str, Any], bool]] = [
    ("empty", {}, False),
    ("plain-full", {"source": "loop", "step": 3}, False),
    ("marker-delta", {MARK: "delta", "source": "loop"}, True),
    ("marker-full", {MARK: "full"}, False),
    ("marker-empty-string", {MARK: ""}, False),
    ("marker-upper-case", {MARK: "DELTA"}, False),
    ("marker-number", {MARK: 1}, False),
    ("marker-list", {MARK: ["delta"]}, False),
    ("marker-object", {MARK: {"mode": "delta"}}, False),
    ("marker-null", {MARK: None}, False),
    ("marker-true", {MARK: True}, False),
    ("counters-only", {COUNT: {"messages": [3, 3]}, "source": "loop"}, True),
    ("counters-null-messages", {COUNT: {"messages": None}}, True),
    ("counters-other-channel", {COUNT: {"todos": [1, 1]}}, False),
    ("counters-empty", {COUNT: {}}, False),
    ("counters-a-list", {COUNT: ["messages"]}, False),
    ("counters-a-string", {COUNT: "messages"}, False),
    ("counters-null", {COUNT: None}, False),
    ("langgraphjs-versioned-only", {"delta_writes_versioned": True, "source": "loop"}, True),
    ("langgraphjs-versioned-false", {"delta_writes_versioned": False}, True),
    ("langgraphjs-versioned-null", {"delta_writes_versioned": None}, True),
    ("langgraphjs-versioned-with-counters", {"delta_writes_versioned": True, COUNT: {"messages": [1, 1]}}, True),
    ("snapshot-marked-without-counters", {MARK: "delta", "source": "loop", "step": 10}, True),
    ("snapshot-unmarked-without-counters", {"source": "loop", "step": 10, "parents": {}}, False),
    ("marker-full-with-counters", {MARK: "full", COUNT: {"messages": [2, 2]}}, True),
]


def test_the_evidence_is_the_marker_the_messages_counters_or_langgraphjs_versioning():
    assert DELTA_EVIDENCE == (MARKER, COUNTERS, VERSIONED)
    assert VERSIONED.path == ("delta_writes_versioned",) and VERSIONED.equals is None
    assert MARKER.path == (MARK,) and MARKER.equals == "delta"
    assert COUNTERS.path == (COUNT, "messages") and COUNTERS.equals is None


@pytest.mark.parametrize(("metadata", "expected"), [pytest.param(m, e, id=i) for i, m, e in CRAFTED])
def test_python_reading_of_crafted_metadata(metadata, expected):
    assert shows_delta(metadata) is expected
    assert checkpoint_metadata_uses_delta(metadata) is expected  # DeerFlow's public name is the same rule


@pytest.mark.parametrize(("metadata", "refused"), [
    ({"counters_since_delta_snapshot": {"messages": [1, 1]}}, True),
    ({"counters_since_delta_snapshot": {"notes": [3, 2]}}, True),  # another channel: full to DeerFlow
    ({"counters_since_delta_snapshot": {}}, True),
    ({"delta_writes_versioned": True}, True),
    ({"deerflow_checkpoint_channel_mode": "delta"}, False),  # DeerFlow's marker alone: LangGraph does not look
    ({"step": 3}, False),
])
def test_langgraphs_prune_refuses_any_counters_or_the_js_key(metadata, refused):
    assert prune_refuses(metadata) is refused
    assert PRUNE_REFUSES == (ANY_COUNTERS, VERSIONED)


def test_none_is_no_evidence():
    assert shows_delta(None) is False and checkpoint_metadata_uses_delta(None) is False


def _sql_evidence(saver: Any) -> dict[tuple[str, str, str], tuple[bool, bool, bool, bool]]:
    reader = reader_for(saver)
    d = reader.dialect
    rows = reader.query(
        f"SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, {d.truthy(d.delta_evidence('c'))} AS delta, "
        f"{d.truthy(d.marker('c'))} AS marker, {d.truthy(d.counters('c'))} AS counters, "
        f"{d.truthy('(' + ' OR '.join(d.clause(c, 'c') for c in PRUNE_REFUSES) + ')')} AS refuses FROM checkpoints c")
    return {(r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"]): (
        bool(r["delta"]), bool(r["marker"]), bool(r["counters"]), bool(r["refuses"])) for r in rows}


def _python_evidence(saver: Any) -> dict[tuple[str, str, str], tuple[bool, bool, bool, bool]]:
    out = {}
    for tup in saver.list(None):
        c = tup.config["configurable"]
        md = tup.metadata
        out[(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])] = (
            shows_delta(md), MARKER.holds(md), COUNTERS.holds(md) or VERSIONED.holds(md), prune_refuses(md))
    return out


def test_python_and_sql_agree_on_every_checkpoint_of_the_real_fixture(fixture_backend):
    backend, database = fixture_backend
    with open_checkpointer(database) as saver:
        assert reader_for(saver).dialect is Dialect(backend)
        python, sql = _python_evidence(saver), _sql_evidence(saver)
    assert len(python) > 500 and python.keys() == sql.keys()
    assert {k: v for k, v in python.items() if sql[k] != v} == {}
    assert {v[0] for v in python.values()} == {True, False}  # the fixture holds both kinds
    assert any(v[:3] == (True, False, True) for v in python.values())  # bookkeeping only (marker-less delta)
    assert any(v[:3] == (True, True, False) for v in python.values())  # a marked snapshot without counters


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_and_sql_agree_on_crafted_metadata(backend, tmp_path):
    with fresh_database(backend, tmp_path, prefix="dfa_evidence") as database, \
            open_checkpointer(database, create=True) as saver:
        for case, metadata, _ in CRAFTED:
            saver.put({"configurable": {"thread_id": case, "checkpoint_ns": ""}}, empty_checkpoint(),
                      metadata, {})
        python, sql = _python_evidence(saver), _sql_evidence(saver)
    expected = {case: delta for case, _, delta in CRAFTED}
    assert {k[0]: v[0] for k, v in python.items()} == expected
    assert {k[0]: v[0] for k, v in sql.items()} == expected
    assert python == sql
