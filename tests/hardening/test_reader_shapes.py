"""Stored shapes LangGraph's reader and ours must agree on (issue 13, "Reading", items 1 and 2).

Every thread is written with the saver's own ``put`` / ``put_writes`` (the
shapes only an old release or a raw writer leaves), on SQLite and Postgres,
then browsed through the API, the thread page and the history:

* an unknown-id ``RemoveMessage`` in a write row: never a 500; the state
  answers 422 ``reducer_error`` naming the checkpoint, the write (the
  checkpoint it is stored under and its task) and the missing id; the history
  lists the checkpoints before the write normally and marks the rest;
* a replay walk that passes an ancestor with neither delta counters nor a
  stored ``messages`` value and then reaches a missing parent: 422
  ``history_incomplete`` (the reader walks on past such an ancestor, so the
  gap check does too); with the parent stored, the walk reaches it and reads
  the whole list.

Browsing writes nothing (every row compared before and after).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base.id import uuid6

from deerflow.config.database_config import DatabaseConfig
from deerflow.reader.lineage import find_lineage_gap
from deerflow.reader.replaycheck import find_reducer_failure
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, COUNTERS_METADATA_KEY
from tests import fixtures_real
from tests.backends import BACKENDS
from tests.deerflow.convert.support import all_rows, config_for, open_saver

pytestmark = pytest.mark.django_db


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatabaseConfig]:
    """A fresh, empty database on each backend (Postgres: dropped afterwards)."""
    if request.param == "sqlite":
        yield DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "sqlite"))
        return
    name, url = fixtures_real.create_database("dfa_shapes")
    try:
        yield DatabaseConfig(backend="postgres", postgres_url=url)
    finally:
        fixtures_real.drop_database(name)


ABSENT = object()


class Writer:
    """Checkpoints and writes through the saver's ``put`` / ``put_writes``, with chosen metadata."""

    def __init__(self, saver: Any, thread_id: str):
        self.saver, self.thread_id, self.version, self.count = saver, thread_id, None, 0

    def new_id(self) -> str:
        self.count += 1
        return str(uuid6(clock_seq=self.count))

    def checkpoint(self, parent: str | None, *, messages: Any = ABSENT, counters: int | None = None,
                   checkpoint_id: str | None = None) -> str:
        cid = checkpoint_id or self.new_id()
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint = {"v": 4, "id": cid, "ts": dt.datetime.now(dt.UTC).isoformat(), "channel_values": {},
                      "channel_versions": {"messages": self.version}, "versions_seen": {}, "updated_channels": None}
        if messages is not ABSENT:
            checkpoint["channel_values"]["messages"] = messages
        metadata: dict[str, Any] = {"source": "loop", "step": self.count, "parents": {},
                                    CHECKPOINT_MODE_METADATA_KEY: "delta"}
        if counters is not None:
            metadata[COUNTERS_METADATA_KEY] = {"messages": counters}
        self.saver.put(config_for(self.thread_id, parent), checkpoint, metadata, {"messages": self.version})
        return cid

    def writes(self, checkpoint_id: str, task_id: str, *values: Any) -> None:
        self.saver.put_writes(config_for(self.thread_id, checkpoint_id), [("messages", v) for v in values], task_id)


def _history(client, thread_id: str) -> dict[str, dict]:
    response = client.get(f"/api/threads/{thread_id}/history?limit=500")
    assert response.status_code == 200, response.content[:300]
    return {r["checkpoint_id"]: r for r in response.json()["checkpoints"]}


# -- item 1: an unknown-id RemoveMessage -------------------------------------------------


def _ghost_thread(db: DatabaseConfig) -> list[str]:
    """root -[h0]-> c1 -[RemoveMessage('ghost'), a0]-> c2 -[h1]-> c3: c2 and c3 replay the bad write."""
    with open_saver(db) as saver:
        w = Writer(saver, "ghost")
        root = w.checkpoint(None, messages=[], counters=None)
        w.writes(root, "input", [HumanMessage("q0", id="h0")])
        c1 = w.checkpoint(root, counters=1)
        w.writes(c1, "agent", [RemoveMessage(id="ghost"), AIMessage("a0", id="a0")])
        c2 = w.checkpoint(c1, counters=2)
        w.writes(c2, "input", [HumanMessage("q1", id="h1")])
        c3 = w.checkpoint(c2, counters=3)
    return [root, c1, c2, c3]


def test_an_unknown_id_remove_is_a_422_naming_the_write_never_a_500(db, runtime_for, staff_client):
    root, c1, c2, c3 = _ghost_thread(db)
    runtime_for(db, "delta")
    before = all_rows(db)

    response = staff_client.get("/api/threads/ghost/state")
    assert response.status_code == 422, response.content[:300]
    body = response.json()
    assert body["code"] == "reducer_error"
    assert f"checkpoint {c3!r}" in body["detail"]  # the checkpoint read
    assert f"stored under checkpoint {c1!r}" in body["detail"] and "task 'agent'" in body["detail"]  # the write
    assert "removes message id 'ghost'" in body["detail"]  # the missing id
    assert "values" not in body and body["hint"]
    older = staff_client.get(f"/api/threads/ghost/state?checkpoint_id={c2}")
    assert older.status_code == 422 and older.json()["code"] == "reducer_error"

    page = staff_client.get("/threads/ghost/")
    assert page.status_code == 422 and "Traceback" not in page.content.decode()
    assert "removes message id" in page.content.decode() and 'id="messages"' not in page.content.decode()

    # the history lists every checkpoint; those before the bad write read normally
    rows = _history(staff_client, "ghost")
    assert list(rows) == [c3, c2, c1, root]
    assert [(rows[c]["message_count"], rows[c]["problem"]) for c in (c3, c2, c1, root)] == [
        (None, "reducer_error"), (None, "reducer_error"), (1, None), (0, None)]
    fragment = staff_client.get("/history/ghost/")
    assert fragment.status_code == 200 and "reducer_error" in fragment.content.decode()
    first = staff_client.get(f"/api/threads/ghost/state?checkpoint_id={c1}")
    assert first.status_code == 200 and [m["id"] for m in first.json()["values"]["messages"]] == ["h0"]
    assert all_rows(db) == before


def test_find_reducer_failure_names_the_write(db):
    root, c1, c2, c3 = _ghost_thread(db)
    with open_saver(db) as saver:
        failure = find_reducer_failure(saver, "ghost", "", c3)
        assert (failure.checkpoint_id, failure.write_checkpoint_id, failure.task_id, failure.write_index,
                failure.missing_ids) == (c3, c1, "agent", 0, ("ghost",))
        assert find_reducer_failure(saver, "ghost", "", c1) is None  # its replay goes through
        assert find_reducer_failure(saver, "ghost", "", root) is None  # it stores its own value
        assert find_reducer_failure(saver, "ghost", "", "no-such-checkpoint") is None


# -- item 2: the gap check walks as far as the reader --------------------------------------


def _walk_past_thread(db: DatabaseConfig, *, store_anchor: bool) -> tuple[str, str, str]:
    """s (stores [h0]) -[a0]-> m (no counters, no value) -[h1]-> t (counters, no value).

    With ``store_anchor=False`` s is never stored: m names a parent that is not there.
    """
    with open_saver(db) as saver:
        w = Writer(saver, "walk-past")
        s = w.new_id()
        if store_anchor:
            w.checkpoint(None, messages=[HumanMessage("q0", id="h0")], checkpoint_id=s)
            w.writes(s, "agent", [AIMessage("a0", id="a0")])
        m = w.checkpoint(s)  # neither delta counters nor a stored messages value
        w.writes(m, "input", [HumanMessage("q1", id="h1")])
        t = w.checkpoint(m, counters=2)
    return s, m, t


def test_a_gap_past_an_ancestor_without_counters_or_value_is_history_incomplete(db, runtime_for, staff_client):
    s, m, t = _walk_past_thread(db, store_anchor=False)
    with open_saver(db) as saver:
        gap = find_lineage_gap(saver, "walk-past", "", t)
        assert (gap.kind, gap.at, gap.parent) == ("missing_parent", m, s)
    runtime_for(db, "delta")
    before = all_rows(db)
    response = staff_client.get("/api/threads/walk-past/state")
    assert response.status_code == 422, response.content[:300]
    body = response.json()
    assert body["code"] == "history_incomplete"
    assert f"checkpoint {m!r} names parent {s!r}, which is not stored" in body["detail"]
    assert "values" not in body
    rows = _history(staff_client, "walk-past")
    assert {c: (r["message_count"], r["problem"]) for c, r in rows.items()} == {
        t: (None, "history_incomplete"), m: (None, "history_incomplete")}
    assert staff_client.get("/threads/walk-past/").status_code == 422
    assert all_rows(db) == before


def test_with_the_ancestor_stored_the_walk_reaches_it_and_reads_the_whole_list(db, runtime_for, staff_client):
    s, m, t = _walk_past_thread(db, store_anchor=True)
    with open_saver(db) as saver:
        assert find_lineage_gap(saver, "walk-past", "", t) is None
        assert find_lineage_gap(saver, "walk-past", "", s) is None
    runtime_for(db, "delta")
    response = staff_client.get("/api/threads/walk-past/state")
    assert response.status_code == 200, response.content[:300]
    assert [msg["id"] for msg in response.json()["values"]["messages"]] == ["h0", "a0", "h1"]
    rows = _history(staff_client, "walk-past")
    assert [(rows[c]["message_count"], rows[c]["problem"]) for c in (t, m, s)] == [(3, None), (2, None), (1, None)]


# -- item 5: Overwrite wrappers stored in any channel's blob ---------------------------------


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_overwrite_wrappers_in_any_channel_show_the_payload_and_are_flagged(db, runtime_for, staff_client, mode):
    """The typed ``Overwrite`` (a real graph's ``update_state`` on a default-less reducer channel stores it), and
    both JSON forms (written with ``put``), on non-``messages`` channels."""
    from langgraph.types import Overwrite

    from deerflow.runtime.checkpoint_state import build_state_mutation_graph

    with open_saver(db) as saver:
        graph = build_state_mutation_graph("manual_state_update", mode, checkpointer=saver)
        config = config_for("wrapped")
        graph.update_state(config, {"messages": Overwrite([HumanMessage("q0", id="h0")])},
                           as_node="manual_state_update")
        graph.update_state(config, {"todos": Overwrite([{"content": "t1", "status": "pending"}])},
                           as_node="manual_state_update")
        head = saver.get_tuple(config)
        assert type(head.checkpoint["channel_values"]["todos"]).__name__ == "Overwrite"  # LangGraph kept the wrapper
        checkpoint = {**head.checkpoint, "id": str(uuid6(clock_seq=99)),
                      "channel_values": {**head.checkpoint["channel_values"],
                                         "title": {"__overwrite__": "A title"},
                                         "sandbox": {"value": {"sandbox_id": "s1"}, "type": "__overwrite__"}}}
        versions = dict(checkpoint["channel_versions"])
        for channel in ("title", "sandbox"):
            versions[channel] = saver.get_next_version(versions.get(channel), None)
        checkpoint["channel_versions"] = versions
        saver.put(head.config, checkpoint, {**head.metadata, "step": head.metadata["step"] + 1},
                  {"title": versions["title"], "sandbox": versions["sandbox"]})
    runtime_for(db, mode)

    response = staff_client.get("/api/threads/wrapped/state")
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    assert body["values"]["todos"] == [{"content": "t1", "status": "pending"}]
    assert body["values"]["title"] == "A title"
    assert body["values"]["sandbox"] == {"sandbox_id": "s1"}
    assert [m["id"] for m in body["values"]["messages"]] == ["h0"]
    assert {(f["kind"], f["channel"]) for f in body["findings"]} == {
        ("overwrite_in_blob", "todos"), ("overwrite_in_blob", "title"), ("overwrite_in_blob", "sandbox")}
    page = staff_client.get("/threads/wrapped/").content.decode()
    assert page.count("stored as an Overwrite wrapper") == 3 and "__overwrite__" not in page
    plain = staff_client.get(f"/api/threads/wrapped/state?checkpoint_id={head.config['configurable']['checkpoint_id']}")
    assert {f["channel"] for f in plain.json()["findings"]} == {"todos"}


# -- item 3: a stored None between the seed and the target -----------------------------------


def _stored_none_thread(db: DatabaseConfig) -> tuple[str, str, str]:
    """s (stores [h0]) -[a0]-> n (stores messages = None) -[h1]-> t: the rule reads [h0, a0, h1]."""
    with open_saver(db) as saver:
        w = Writer(saver, "stored-none")
        s = w.checkpoint(None, messages=[HumanMessage("q0", id="h0")])
        w.writes(s, "agent", [AIMessage("a0", id="a0")])
        n = w.checkpoint(s, messages=None, counters=1)
        w.writes(n, "input", [HumanMessage("q1", id="h1")])
        t = w.checkpoint(n, counters=2)
    return s, n, t


def test_a_stored_none_is_no_seed_and_a_disagreement_is_flagged(db, runtime_for, staff_client):
    from deerflow.convert import convert_thread
    from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

    s, n, t = _stored_none_thread(db)
    with open_saver(db) as saver:
        theirs = CheckpointStateAccessor.for_saver(saver, mode="delta").get(config_for("stored-none", t))
        langgraph_ids = [m.id for m in theirs.values["messages"]]
    assert langgraph_ids == (["h1"] if db.backend == "sqlite" else ["h0", "a0", "h1"])  # LangGraph #8686 on SQLite
    runtime_for(db, "delta")
    body = staff_client.get("/api/threads/stored-none/state").json()
    assert [m["id"] for m in body["values"]["messages"]] == ["h0", "a0", "h1"]
    flagged = [f for f in body["findings"] if f["kind"] == "reader_disagreement"]
    if db.backend == "sqlite":
        assert [(f["reason"], f["message_count"], f["langgraph_message_count"]) for f in flagged] == [
            ("stored_none", 3, 1)]
        assert "LangGraph's reader reads 1 messages at this checkpoint, the replay rule 3" in flagged[0]["detail"]
        page = staff_client.get("/threads/stored-none/").content.decode()
        assert "reader_disagreement" in page and "LangGraph #8686" in page
    else:
        assert flagged == []  # Postgres's reader walks past an inline null too: both agree
    rows = _history(staff_client, "stored-none")
    assert [(rows[c]["message_count"], rows[c]["langgraph_message_count"]) for c in (t, n, s)] == (
        [(3, 1), (2, 0), (1, None)] if db.backend == "sqlite" else [(3, None), (2, 0), (1, None)])  # n itself: both

    report = convert_thread(db, "stored-none")
    assert report.status == "converted", (report.error, report.first_difference)
    assert {f["kind"] for f in report.findings} >= {"stored_none"}
    # the savers disagree there: the replay rule's value is kept, and recorded per checkpoint it reaches
    assert sorted(f["checkpoint_id"] for f in report.findings if f["kind"] == "reader_departure") == sorted([n, t])
    with open_saver(db) as saver:
        full = CheckpointStateAccessor.for_saver(saver, mode="full").get(config_for("stored-none", t))
        assert [m.id for m in full.values["messages"]] == ["h0", "a0", "h1"]


# -- item 4: sibling forks whose writes are all keyed to the branch point --------------------


def _sibling_thread(db: DatabaseConfig, *, second_source: str) -> tuple[str, str, str, str]:
    """s (stores [h0]) with writes [a1] (task one) and [a2] (task two); children c1 (loop) and c2 (second_source)."""
    with open_saver(db) as saver:
        w = Writer(saver, "siblings")
        s = w.checkpoint(None, messages=[HumanMessage("q0", id="h0")])
        w.writes(s, "one", [AIMessage("a1", id="a1")])
        w.writes(s, "two", [AIMessage("a2", id="a2")])
        c1 = w.checkpoint(s, counters=1)
        c2 = w.checkpoint(s, counters=1)
        if second_source != "loop":
            tup = saver.get_tuple(config_for("siblings", c2))
            saver.put(config_for("siblings", s), tup.checkpoint, {**tup.metadata, "source": second_source},
                      {"messages": tup.checkpoint["channel_versions"]["messages"]})
    return s, c1, c2, "siblings"


def test_sibling_forks_that_cannot_be_told_apart_are_branch_ambiguous(db, runtime_for, staff_client):
    from deerflow.convert import convert_thread, dry_run_thread

    s, c1, c2, thread = _sibling_thread(db, second_source="loop")
    runtime_for(db, "delta")
    before = all_rows(db)
    response = staff_client.get(f"/api/threads/{thread}/state")
    assert response.status_code == 422, response.content[:300]
    body = response.json()
    assert body["code"] == "branch_ambiguous" and f"branch point {s!r}" in body["detail"] and "values" not in body
    page = staff_client.get(f"/threads/{thread}/")
    assert page.status_code == 422 and "branch point" in page.content.decode()
    rows = _history(staff_client, thread)
    assert {c: (r["message_count"], r["problem"]) for c, r in rows.items()} == {
        c2: (None, "branch_ambiguous"), c1: (None, "branch_ambiguous"), s: (1, None)}
    assert all_rows(db) == before

    refused = convert_thread(db, thread)
    assert refused.status == "branch_ambiguous" and "--acknowledge-branch-ambiguous" in refused.hint
    assert all_rows(db) == before
    assert dry_run_thread(db, thread).status == "branch_ambiguous"
    assert dry_run_thread(db, thread, acknowledge_branch_ambiguous=True).status == "needs_conversion"
    done = convert_thread(db, thread, acknowledge_branch_ambiguous=True)
    assert done.status == "converted" and done.acknowledged == ["branch_ambiguous"]


def test_an_input_child_of_a_fork_consumed_none_of_the_branch_points_writes(db, runtime_for, staff_client):
    from deerflow.convert import convert_thread
    from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

    s, c1, c2, thread = _sibling_thread(db, second_source="input")
    runtime_for(db, "delta")
    body = staff_client.get(f"/api/threads/{thread}/state?checkpoint_id={c2}").json()
    assert [m["id"] for m in body["values"]["messages"]] == ["h0"]
    flagged = [f for f in body["findings"] if f["kind"] == "reader_disagreement"]
    assert [(f["reason"], f["message_count"], f["langgraph_message_count"]) for f in flagged] == [("fork_input", 1, 3)]
    one = staff_client.get(f"/api/threads/{thread}/state?checkpoint_id={c1}").json()
    assert [m["id"] for m in one["values"]["messages"]] == ["h0", "a1", "a2"] and not [
        f for f in one["findings"] if f["kind"] == "reader_disagreement"]
    assert "DeerFlow #4458" in staff_client.get(f"/threads/{thread}/?checkpoint_id={c2}").content.decode()
    rows = _history(staff_client, thread)
    assert (rows[c2]["message_count"], rows[c2]["langgraph_message_count"], rows[c2]["disagreement"]) == (
        1, 3, "fork_input")
    report = convert_thread(db, thread)
    assert report.status == "converted", (report.error, report.first_difference)
    with open_saver(db) as saver:  # the conversion stores LangGraph's reading: a full-mode DeerFlow serves it
        full = CheckpointStateAccessor.for_saver(saver, mode="full").get(config_for(thread, c2))
        assert [m.id for m in full.values["messages"]] == ["h0", "a1", "a2"]
    assert not [f for f in report.findings if f["kind"] == "reader_departure"]
    from deerflow.convert import revert_thread
    assert revert_thread(db, report.backup_id).status == "reverted"  # the restored rows read what it stored


def test_convert_threads_refuses_ambiguous_forks_unless_acknowledged_and_records_it(db, runtime_for):
    from django.core.management import CommandError, call_command

    from dashboard.jobs.models import ConversionJob

    _sibling_thread(db, second_source="loop")
    runtime_for(db, "delta")
    before = all_rows(db)
    with pytest.raises(CommandError, match="failed"):
        call_command("convert_threads", "--to", "full", "--thread", "siblings", "--yes")
    assert all_rows(db) == before
    assert ConversionJob.objects.get(kind="dry_run").results.get().status == "branch_ambiguous"
    call_command("convert_threads", "--to", "full", "--thread", "siblings", "--yes", "--acknowledge-branch-ambiguous")
    job = ConversionJob.objects.filter(kind="convert").get()
    assert job.acknowledge_branch_ambiguous and job.results.get().status == "converted"


def test_the_history_fragment_shows_both_counts_and_the_ambiguity(db, runtime_for, staff_client):
    s, c1, c2, thread = _sibling_thread(db, second_source="input")
    runtime_for(db, "delta")
    fragment = staff_client.get(f"/history/{thread}/").content.decode()
    assert "(LangGraph&#x27;s reader: 3)" in fragment or "(LangGraph's reader: 3)" in fragment


def _fork_input_thread(db: DatabaseConfig) -> tuple[str, str, str, str]:
    """:func:`_sibling_thread` with an ``input`` c2 and a turn on it: c2 -[h3]-> c3 (the head)."""
    s, c1, c2, thread = _sibling_thread(db, second_source="input")
    with open_saver(db) as saver:
        w = Writer(saver, thread)
        w.count = 10
        w.version = saver.get_tuple(config_for(thread, c2)).checkpoint["channel_versions"]["messages"]
        w.writes(c2, "__start__", [HumanMessage("q3", id="h3")])
        c3 = w.checkpoint(c2, counters=2)
    return c1, c2, c3, thread


def _reading(client, thread_id: str, checkpoint_id: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    body = client.get(f"/api/threads/{thread_id}/state?checkpoint_id={checkpoint_id}").json()
    flagged = [(f["reason"], f["message_count"], f["langgraph_message_count"])
               for f in body["findings"] if f["kind"] == "reader_disagreement"]
    return [m["id"] for m in body["values"]["messages"]], flagged


def test_pruning_the_sibling_of_an_input_fork_keeps_what_the_fork_reads(db, runtime_for, staff_client):
    """Retention (a): the input child is classified from its own stored data, so deleting its sibling
    (safe_only) changes neither our reading nor the flag; (b): a keep_last that would cut the chain the fork's
    reading goes through keeps it instead (protected ``reader_disagreement``, nothing rebased), so LangGraph's
    reader reads every kept checkpoint as before and the flag stays."""
    from deerflow.retention import keep_last, safe_only
    from tests.deerflow.retention.support import all_keys, parent_of, read

    c1, c2, c3, thread = _fork_input_thread(db)
    s = parent_of(db, thread, c2)
    runtime_for(db, "delta")
    assert _reading(staff_client, thread, c2) == (["h0"], [("fork_input", 1, 3)])
    assert _reading(staff_client, thread, c3) == (["h0", "h3"], [("fork_input", 2, 4)])
    report = safe_only(db, thread)
    assert (report.status, report.deleted_checkpoint_ids) == ("pruned", [c1]), report.error
    assert _reading(staff_client, thread, c2) == (["h0"], [("fork_input", 1, 3)])
    assert _reading(staff_client, thread, c3) == (["h0", "h3"], [("fork_input", 2, 4)])
    before = read(db, thread, [("", c2), ("", c3)])
    assert before[("", c3)][0] == 4  # LangGraph's reader: every write of the fork point
    preview = keep_last(db, thread, 1, dry_run=True)
    assert preview.status == "nothing_to_prune" and preview.rebased_checkpoint_ids == []
    assert {(p["checkpoint_id"], p["reason"]) for p in preview.protected} == {
        (c3, "head"), (c2, "reader_disagreement"), (s, "reader_disagreement")}
    assert {cid for _ns, cid in all_keys(db, thread)} == {s, c2, c3}
    assert read(db, thread, [("", c2), ("", c3)]) == before
    assert _reading(staff_client, thread, c3) == (["h0", "h3"], [("fork_input", 2, 4)])


def test_keep_last_keeps_a_fork_inputs_reading_chain_and_deletes_above_its_seed(db, runtime_for):
    """Above the stored seed the chain goes as usual; the kept chain starts at the seed (no rebase)."""
    from deerflow.retention import keep_last
    from tests.deerflow.retention.support import all_keys, read

    with open_saver(db) as saver:
        w = Writer(saver, "long-fork")
        root = w.checkpoint(None, messages=[])
        w.writes(root, "input", [HumanMessage("q0", id="h0")])
        s = w.checkpoint(root, messages=[HumanMessage("q0", id="h0")], counters=1)
        w.writes(s, "one", [AIMessage("a1", id="a1")])
        w.checkpoint(s, counters=1)
        c2 = w.checkpoint(s, counters=1)
        tup = saver.get_tuple(config_for("long-fork", c2))
        saver.put(config_for("long-fork", s), tup.checkpoint, {**tup.metadata, "source": "input"},
                  {"messages": tup.checkpoint["channel_versions"]["messages"]})
        w.writes(c2, "__start__", [HumanMessage("q3", id="h3")])
        c3 = w.checkpoint(c2, counters=2)
    keys = all_keys(db, "long-fork")
    before = read(db, "long-fork", keys)
    report = keep_last(db, "long-fork", 1)
    assert report.status == "pruned", (report.error, report.first_difference)
    assert report.rebased_checkpoint_ids == [] and set(report.deleted_checkpoint_ids) == keys_minus(
        keys, {s, c2, c3})
    kept = all_keys(db, "long-fork")
    assert {cid for _ns, cid in kept} == {s, c2, c3} and root not in report.kept_checkpoint_ids
    assert read(db, "long-fork", kept) == {k: before[k] for k in kept}


def keys_minus(keys: set[tuple[str, str]], ids: set[str]) -> set[str]:
    return {cid for _ns, cid in keys} - ids


def test_keep_last_keeps_the_chain_through_a_stored_none_on_both_savers(db):
    """The savers read a stored ``None`` differently (LangGraph #8686): no single rebase value keeps both
    readings, so keep_last keeps the chain to the seed and each saver reads every kept checkpoint as before."""
    from deerflow.retention import keep_last
    from tests.deerflow.retention.support import all_keys, read

    with open_saver(db) as saver:
        w = Writer(saver, "stored-none")
        root = w.checkpoint(None, messages=[])
        w.writes(root, "input", [HumanMessage("q0", id="h0")])
        s = w.checkpoint(root, messages=[HumanMessage("q0", id="h0")], counters=1)
        w.writes(s, "agent", [AIMessage("a0", id="a0")])
        n = w.checkpoint(s, messages=None, counters=1)
        w.writes(n, "input", [HumanMessage("q1", id="h1")])
        t = w.checkpoint(n, counters=2)
    before = read(db, "stored-none")
    assert before[("", t)][0] == (1 if db.backend == "sqlite" else 3)
    report = keep_last(db, "stored-none", 1)
    assert (report.status, report.deleted_checkpoint_ids, report.rebased_checkpoint_ids) == (
        "pruned", [root], []), (report.error, report.first_difference)
    assert {(p["checkpoint_id"], p["reason"]) for p in report.protected} == {
        (t, "head"), (n, "reader_disagreement"), (s, "reader_disagreement")}
    kept = all_keys(db, "stored-none")
    assert read(db, "stored-none", kept) == {k: before[k] for k in kept}
