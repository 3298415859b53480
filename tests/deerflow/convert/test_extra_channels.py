"""Unknown channels contributed by middleware (a graph whose schema adds fields the converter does not
know) are kept untouched: their stored values, blobs and writes are the same after conversion."""

from __future__ import annotations

from typing import Any

from deerflow.agents.thread_state import adapt_state_schema_for_mode
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from tests.deerflow.convert.support import (
    agent_graph,
    config_for,
    convert_and_compare,
    execute,
    human,
    open_saver,
    raw_rows,
    run_turn,
    schema_with_extra_channels,
    stored_tuples,
)

SCHEMA = schema_with_extra_channels()


def _extra(state: dict[str, Any]) -> dict[str, Any]:
    n = len(state["messages"])
    return {"notes": [f"note {n}"], "mood": f"mood {n}", "title": f"title {n}"}


def _values(database, mode: str) -> dict[str, dict[str, Any]]:
    schema = adapt_state_schema_for_mode(SCHEMA, mode)
    with open_saver(database) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode=mode, state_schema=schema)
        return {s.config["configurable"]["checkpoint_id"]: {k: v for k, v in s.values.items() if k != "messages"}
                for s in accessor.history(config_for("mw"))}


def test_middleware_channels_are_untouched(scratch_db):
    with open_saver(scratch_db) as saver:
        graph = agent_graph(saver, schema=SCHEMA, extra=_extra, tool_every=2)
        for t in range(4):
            run_turn(graph, "mw", human(t))
    stored_before = {t.config["configurable"]["checkpoint_id"]: {k: v for k, v in t.checkpoint["channel_values"].items()
                                                                 if k != "messages"}
                     for t in stored_tuples(scratch_db, "mw")}
    assert any("notes" in v and "mood" in v for v in stored_before.values())
    delta_values = _values(scratch_db, "delta")
    rows = raw_rows(scratch_db, "mw")

    convert_and_compare(scratch_db, "mw")

    stored_after = {t.config["configurable"]["checkpoint_id"]: {k: v for k, v in t.checkpoint["channel_values"].items()
                                                                if k != "messages"}
                    for t in stored_tuples(scratch_db, "mw")}
    assert stored_after == stored_before
    assert _values(scratch_db, "full") == delta_values
    after = raw_rows(scratch_db, "mw")
    assert after["writes"] == rows["writes"]
    if scratch_db.backend == "postgres":
        assert [r for r in after["blobs"] if r[1] != "messages"] == [r for r in rows["blobs"] if r[1] != "messages"]
        notes = execute(scratch_db,
                        "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = 'mw' AND channel = 'notes'")
        assert notes[0][0] > 0
