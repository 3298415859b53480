"""deerflow.inventory.census (cadence inference, recent writer facts) and the census classes, on real data.

The real fixture is the oracle for both backends: every thread's class and
inferred cadence must follow from the manifest's own facts (category, marker
summary, the head checkpoint's marker and counters, each checkpoint's parent
and counters). Threads written here with LangGraph and DeerFlow's state
schema cover what the fixture does not: several cadences on one thread, a
full-mode write onto a delta thread, and forks, where LangGraph forces a
snapshot whatever the cadence.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from deerflow import inventory
from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.config.database_config import DatabaseConfig
from deerflow.inventory import census
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from deerflow.storage import checkpoint_time, reader_for
from deerflow.storage.savers import open_checkpointer
from tests import fixtures_real
from tests.dashboard.fleet.writes import write_turns

BEFORE_EVERYTHING = "00000000-0000-6000-8000-000000000000"


# -- the manifest as oracle -------------------------------------------------------------------

def _checkpoints(thread: dict, backend: str) -> list[dict]:
    return thread["backends"][backend]["checkpoints"]


def _head(thread: dict, backend: str) -> dict:
    b = thread["backends"][backend]
    return next(c for c in b["checkpoints"] if c["checkpoint_id"] == b["head_checkpoint_id"])


def _has_delta(c: dict) -> bool:
    return bool(c["delta_marker"] or c["counters_since_delta_snapshot"])


def expected_class(thread: dict, backend: str) -> str:
    """The census class the manifest's facts imply (inventory's rules, stated on manifest fields)."""
    summary = thread["backend_independent"]["marker_summary"]
    if summary["with_delta_marker"] == 0 and summary["with_counters_since_delta_snapshot"] == 0:
        return "full"  # full threads, and delta-empty (DeerFlow's create path stamps no marker)
    if not _has_delta(_head(thread, backend)):
        # A head without marker or counters over delta ancestors: the marker-less thread whose
        # head is a snapshot checkpoint, which the head-only gate misreads as full.
        return "inconsistent"
    if summary["with_delta_marker"] == 0:
        return "delta_counters_only"
    legacy_full = [c for c in _checkpoints(thread, backend)
                   if c["checkpoint_ns"] == "" and c["step"] >= 0 and not _has_delta(c)]
    return "migrated" if legacy_full else "delta"


def manifest_snapshots(thread: dict, backend: str) -> list[tuple[int, int]]:
    """Parent counters ``(u, s)`` of every checkpoint that dropped its parent's counters."""
    by_id = {(c["checkpoint_ns"], c["checkpoint_id"]): c for c in _checkpoints(thread, backend)}
    out = []
    for c in _checkpoints(thread, backend):
        parent = by_id.get((c["checkpoint_ns"], c["parent_checkpoint_id"]))
        if parent and parent["counters_since_delta_snapshot"] and not c["counters_since_delta_snapshot"]:
            out.append(tuple(parent["counters_since_delta_snapshot"]["messages"]))
    return out


def max_updates(thread: dict, backend: str) -> int | None:
    counters = [c["counters_since_delta_snapshot"]["messages"][0] for c in _checkpoints(thread, backend)
                if c["counters_since_delta_snapshot"]]
    return max(counters) if counters else None


@pytest.fixture
def fixture_saver(fixture_backend):
    backend, database = fixture_backend
    with open_checkpointer(database) as saver:
        yield backend, saver


@pytest.fixture(params=["summary", "scan", "scan-threads"])
def infer(request):
    """``census.infer_cadences`` through the summary's cadence facts, or by scanning ``checkpoints``
    (``scan-threads``: naming every stored thread, as the thread page does, so the one-pass sibling
    ranking of :func:`deerflow.inventory.summary.cadences.thread_snapshot_sql` finds the snapshots)."""
    from_summary = request.param == "summary"

    def run(saver, *args, **kwargs):
        if request.param == "scan-threads" and not args and "thread_ids" not in kwargs:
            args = ([r["thread_id"] for r in reader_for(saver).query(
                "SELECT DISTINCT thread_id FROM checkpoints")],)
        got = census.infer_cadences(saver, *args, use_summary=from_summary, **kwargs)
        assert census._summary_cadences_ready(saver) is True  # so the summary path really was available
        return got

    return run


def test_manifest_expectations_cover_every_class_the_spec_names(manifest):
    expected = {t["thread_id"]: expected_class(t, "sqlite") for t in manifest["threads"]}
    assert expected["migrated-full20-delta20"] == "migrated"
    assert expected["markerless-delta-f10-13t"] == "inconsistent"
    assert expected["delta-f3-40t"] == expected["delta-f100-150t"] == expected["delta-f10-1t"] == "delta"
    assert expected["full-tools-30t"] == expected["delta-empty"] == "full"
    by_category = {}
    for t in manifest["threads"]:
        by_category.setdefault(t["category"], set()).add(expected[t["thread_id"]])
    assert by_category["full"] == {"full"}
    assert by_category["delta"] == {"delta"}


def test_census_classes_match_manifest_for_every_thread(fixture_saver, manifest):
    backend, saver = fixture_saver
    summaries, cursor = inventory.list_threads(saver, limit=1000)
    assert cursor is None
    got = {s.thread_id: s.thread_class for s in summaries}
    expected = {t["thread_id"]: expected_class(t, backend) for t in manifest["threads"]}
    assert got == expected


def test_inferred_cadences_match_manifest_for_every_thread(fixture_saver, manifest, infer):
    backend, saver = fixture_saver
    inferred = infer(saver)
    with_counters = {t["thread_id"] for t in manifest["threads"]
                     if t["backend_independent"]["marker_summary"]["with_counters_since_delta_snapshot"]}
    assert set(inferred) == with_counters
    checked_exact, checked_bound = set(), set()
    for thread in manifest["threads"]:
        tid = thread["thread_id"]
        if tid not in with_counters:
            continue
        frequency = thread["snapshot_frequency"]
        assert frequency is not None, tid
        inf = inferred[tid]
        snapshots = manifest_snapshots(thread, backend)
        assert inf.snapshots == len(snapshots), tid
        if snapshots:
            assert inf.exact == [frequency], tid
            assert inf.lower_bound is None and inf.is_exact and inf.inferred == frequency, tid
            checked_exact.add(tid)
        else:
            assert inf.exact == [], tid
            assert inf.lower_bound == max_updates(thread, backend) + 1, tid
            assert inf.lower_bound <= frequency, tid
            assert not inf.is_exact and inf.inferred == inf.lower_bound, tid
            checked_bound.add(tid)
    # The threads the issue names were all checked, on the branch their data calls for.
    assert {"delta-f3-40t", "delta-f100-150t", "migrated-full20-delta20", "markerless-delta-f10-13t",
            "delta-f10-50t"} <= checked_exact
    assert checked_bound == {"delta-f10-1t"}
    assert inferred["delta-f3-40t"].exact == [3] and inferred["delta-f100-150t"].exact == [100]


def test_infer_cadences_restricted_to_thread_ids(fixture_saver, infer):
    _backend, saver = fixture_saver
    got = infer(saver, ["delta-f3-40t", "delta-f10-1t", "full-tools-30t", "no-such-thread"])
    assert sorted(got) == ["delta-f10-1t", "delta-f3-40t"]
    assert got["delta-f3-40t"].exact == [3]
    assert census.infer_cadences(saver, []) == {}


def test_supersteps_bound_snapshots_are_not_cadence_evidence(fixture_saver, manifest, infer):
    backend, saver = fixture_saver
    # With a bound of 1 every snapshot could have been caused by it: nothing is exact any more.
    got = infer(saver, max_supersteps=1)
    assert all(inf.exact == [] for inf in got.values())
    thread = fixtures_real.manifest_threads()["delta-f3-40t"]
    assert got["delta-f3-40t"].lower_bound == max_updates(thread, backend) + 1 == 3
    assert got["delta-f3-40t"].snapshots == len(manifest_snapshots(thread, backend))


def test_recent_writer_facts_over_the_whole_fixture(fixture_saver, manifest):
    backend, saver = fixture_saver
    facts = census.recent_writer_facts(saver, BEFORE_EVERYTHING)
    all_cps = [c for t in manifest["threads"] for c in _checkpoints(t, backend)]
    assert facts.checkpoints == len(all_cps)
    assert facts.threads == len(manifest["threads"])
    assert facts.delta_marked == sum(1 for c in all_cps if c["delta_marker"])
    assert facts.counters_only == sum(1 for c in all_cps
                                      if c["counters_since_delta_snapshot"] and not c["delta_marker"])
    assert facts.counters_only == 49  # the marker-less thread
    assert facts.plain == facts.checkpoints - facts.delta_marked - facts.counters_only
    expected_cadences: dict[int, int] = {}
    for t in manifest["threads"]:
        n = len(manifest_snapshots(t, backend))
        if n:
            expected_cadences[t["snapshot_frequency"]] = expected_cadences.get(t["snapshot_frequency"], 0) + n
    assert facts.cadences == expected_cadences
    assert set(facts.cadences) == {3, 10, 100}
    newest = max(c["checkpoint_id"] for c in all_cps)
    assert facts.last_write_at == checkpoint_time(newest).isoformat()
    assert facts.as_dict()["cadences"] == {str(k): v for k, v in expected_cadences.items()}


def test_recent_writer_facts_window_is_by_checkpoint_id(fixture_saver, manifest):
    backend, saver = fixture_saver
    ids = sorted(c["checkpoint_id"] for t in manifest["threads"] for c in _checkpoints(t, backend))
    since = ids[-10]
    facts = census.recent_writer_facts(saver, since)
    assert facts.checkpoints == 9
    empty = census.recent_writer_facts(saver, ids[-1])
    assert (empty.checkpoints, empty.threads, empty.cadences, empty.last_write_at) == (0, 0, {}, None)


# -- threads written here -----------------------------------------------------------------------

@pytest.fixture
def written(tmp_path: Path) -> DatabaseConfig:
    return DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "written"))


def test_two_cadences_on_one_thread_are_both_exact(written, infer):
    write_turns(written, "mixed", 4, snapshot_frequency=4)
    write_turns(written, "mixed", 6, snapshot_frequency=9, start=4)
    with open_checkpointer(written) as saver:
        inf = infer(saver)["mixed"]
        facts = census.recent_writer_facts(saver, BEFORE_EVERYTHING)
    assert inf.exact == [4, 9]
    assert not inf.is_exact and inf.inferred is None and inf.lower_bound is None
    assert set(facts.cadences) == {4, 9}


def test_before_the_first_snapshot_only_a_lower_bound(written, infer):
    write_turns(written, "young", 2, snapshot_frequency=10)
    with open_checkpointer(written) as saver:
        inf = infer(saver)["young"]
    assert inf.exact == [] and inf.snapshots == 0
    assert inf.lower_bound == 5  # two turns: [4, 6] at the head, so the cadence is at least 5
    assert inf.inferred == 5 and not inf.is_exact


def test_full_mode_write_onto_a_delta_thread_is_not_a_snapshot(written, infer):
    # A full-mode process (no marker, no counters) writes onto a marked delta thread
    # whose head carries [6, 9]. Read as a snapshot it would "prove" cadence 7.
    write_turns(written, "flipped", 3, snapshot_frequency=10)
    write_turns(written, "flipped", 1, mode="full", start=50)
    with open_checkpointer(written) as saver:
        inf = infer(saver)["flipped"]
        facts = census.recent_writer_facts(saver, BEFORE_EVERYTHING)
        summary = inventory.get_thread_summary(saver, "flipped")
    assert inf.exact == [] and inf.snapshots == 0 and inf.lower_bound == 7
    assert facts.cadences == {}
    assert summary.thread_class == "inconsistent"  # full head over delta ancestors


def _branch_graph(saver, snapshot_frequency: int):
    builder = StateGraph(get_thread_state_schema("delta", snapshot_frequency))
    builder.add_node("agent", lambda state: {"messages": [
        AIMessage(content="branch", id=f"ai-branch-{len(state['messages'])}")]})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("variant", ["replay-from-input", "fork-with-new-input"])
def test_forced_snapshot_at_a_fork_is_not_cadence_evidence(written, variant, infer):
    # Cadence 4: three turns pass one genuine snapshot. Then a run starts from an earlier
    # checkpoint that already has a child; LangGraph snapshots the new branch's first
    # checkpoint whatever the counters say ([2, 4] there, which would read as cadence 3).
    write_turns(written, "forked", 3, snapshot_frequency=4)
    with open_checkpointer(written) as saver:
        reader = reader_for(saver)
        inputs = [r["checkpoint_id"] for r in reader.query(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND "
            "json_extract(CAST(metadata AS TEXT), '$.source') = 'input' ORDER BY checkpoint_id", ["forked"])]
        assert len(inputs) == 3
        assert infer(saver)["forked"].exact == [4]
        graph = _branch_graph(saver, 4)
        config = inject_checkpoint_mode({"configurable": {"thread_id": "forked", "checkpoint_id": inputs[1]}},
                                        "delta")
        if variant == "replay-from-input":
            graph.invoke(None, config)
        else:
            graph.invoke({"messages": [HumanMessage(content="other question", id="human-branch")]}, config)
        inf = infer(saver)["forked"]
        facts = census.recent_writer_facts(saver, BEFORE_EVERYTHING)
        children = reader.query(
            "SELECT CAST(metadata AS TEXT) AS m FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "AND parent_checkpoint_id = ? ORDER BY checkpoint_id", ["forked", inputs[1]])
    # The fork point has two children now; the newer one dropped the counters (a forced snapshot).
    assert len(children) == 2
    assert "counters_since_delta_snapshot" in children[0]["m"]
    assert "counters_since_delta_snapshot" not in children[1]["m"]
    assert inf.exact == [4]
    assert set(facts.cadences) == {4}


def test_markerless_writer_is_counters_only_with_its_cadence(written, infer):
    write_turns(written, "plain-langgraph", 7, snapshot_frequency=5, marker=False)
    with open_checkpointer(written) as saver:
        inf = infer(saver)["plain-langgraph"]
        facts = census.recent_writer_facts(saver, BEFORE_EVERYTHING)
        summary = inventory.get_thread_summary(saver, "plain-langgraph")
    assert inf.exact == [5]
    assert facts.delta_marked == 0 and facts.counters_only > 0 and facts.cadences == {5: inf.snapshots}
    assert summary.thread_class == "delta_counters_only"


# -- the summary's cadence facts: what the audit reads at any scale --------------------------------

def test_cadence_outliers_from_the_summary_equal_a_scan(fixture_saver, monkeypatch):
    _backend, saver = fixture_saver
    fast = census.cadence_outliers(saver, 10)
    assert (fast.multiple, fast.differs) == (0, 2)
    assert [(c.thread_id, c.exact) for c in fast.differs_examples] == [("delta-f100-150t", [100]),
                                                                       ("delta-f3-40t", [3])]
    assert census.cadence_outliers(saver, 10, limit=1).differs_examples[0].thread_id == "delta-f100-150t"
    assert census.cadence_outliers(saver, None).differs == 0
    assert census.cadence_outliers(saver, 10, max_supersteps=1).differs == 0  # nothing proven under bound 1
    monkeypatch.setattr(census, "_summary_cadences_ready", lambda saver: False)
    slow = census.cadence_outliers(saver, 10)
    assert (slow.multiple, slow.differs) == (fast.multiple, fast.differs)
    assert [c.thread_id for c in slow.differs_examples] == [c.thread_id for c in fast.differs_examples]


def test_cadence_outliers_count_threads_written_at_two_cadences(written):
    write_turns(written, "mixed", 4, snapshot_frequency=4)
    write_turns(written, "mixed", 6, snapshot_frequency=9, start=4)
    write_turns(written, "steady", 12, snapshot_frequency=9)
    with open_checkpointer(written) as saver:
        got = census.cadence_outliers(saver, 9)
    assert (got.multiple, got.differs) == (1, 1)
    assert [(c.thread_id, c.exact) for c in got.multiple_examples] == [("mixed", [4, 9])]


def test_new_checkpoints_update_the_cadence_facts_on_refresh(written):
    write_turns(written, "young", 2, snapshot_frequency=10)
    with open_checkpointer(written) as saver:
        assert census.infer_cadences(saver)["young"].lower_bound == 5
    write_turns(written, "young", 8, snapshot_frequency=10, start=2)
    with open_checkpointer(written) as saver:  # a new saver refreshes the summary first (a few new checkpoints)
        assert census.infer_cadences(saver)["young"].exact == [10]


def test_a_summary_built_before_the_cadence_facts_is_rebuilt(written):
    import sqlite3

    from deerflow.inventory.summary.schema import MIGRATIONS

    write_turns(written, "mixed", 4, snapshot_frequency=4)
    with open_checkpointer(written) as saver:
        assert census.infer_cadences(saver)["mixed"].exact == [4]
    first = next(i for i, step in enumerate(MIGRATIONS["sqlite"]) if "dfa_thread_cadences (" in step)
    with sqlite3.connect(Path(written.sqlite_dir) / "deerflow.db") as conn:  # the schema of an older release
        conn.execute("DROP TABLE dfa_thread_cadences")
        conn.execute("DELETE FROM dfa_summary_migrations WHERE v >= ?", (first,))
    with open_checkpointer(written) as saver:
        assert census._summary_cadences_ready(saver) is True
        assert census.infer_cadences(saver)["mixed"].exact == [4]


# -- the thread page's one-pass snapshot query equals the shared definition ------------------------

def _snapshot_rows(saver, sql_of, where: str = "", params: list | None = None) -> list[tuple]:
    r = reader_for(saver)
    return sorted((row["thread_id"], row["u"], row["s"]) for row in r.query(sql_of(r, where), params or []))


def test_thread_snapshot_sql_equals_snapshot_sql_on_the_fixture(fixture_saver, manifest):
    from deerflow.inventory.summary.cadences import snapshot_sql, thread_snapshot_sql

    _backend, saver = fixture_saver
    every = _snapshot_rows(saver, snapshot_sql)
    assert len(every) > 20  # the fixture's delta threads snapshot
    assert _snapshot_rows(saver, thread_snapshot_sql) == every
    for tid in ("delta-f3-40t", "migrated-full20-delta20", "markerless-delta-f10-13t", "full-tools-30t"):
        one = _snapshot_rows(saver, thread_snapshot_sql, "AND c.thread_id IN (?)", [tid])
        assert one == [row for row in every if row[0] == tid], tid


@pytest.fixture(params=["sqlite", "postgres"])
def writable(request, tmp_path: Path) -> DatabaseConfig:
    if request.param == "sqlite":
        return DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "writable"))
    return request.getfixturevalue("empty_postgres_db")


def test_thread_snapshot_sql_ranks_siblings_like_snapshot_sql(writable):
    # Forks (a replay and a new input from one checkpoint: the newer children are forced snapshots, not
    # first children), a full-mode write under a marked parent, two cadences: both queries find the same rows.
    from deerflow.inventory.summary.cadences import snapshot_sql, thread_snapshot_sql

    heads = write_turns(writable, "forks", 4, snapshot_frequency=3)
    write_turns(writable, "forks", 2, snapshot_frequency=3, from_checkpoint_id=heads[1], start=10)
    write_turns(writable, "forks", 1, snapshot_frequency=3, from_checkpoint_id=heads[1], start=20)
    write_turns(writable, "flips", 3, snapshot_frequency=10)
    write_turns(writable, "flips", 1, mode="full", start=50)
    write_turns(writable, "flips", 4, snapshot_frequency=2, start=60)
    with open_checkpointer(writable) as saver:
        reader = reader_for(saver)
        siblings = reader.query("SELECT parent_checkpoint_id, COUNT(*) AS n FROM checkpoints WHERE thread_id = ? "
                                "GROUP BY parent_checkpoint_id HAVING COUNT(*) > 1", ["forks"])
        every = _snapshot_rows(saver, snapshot_sql)
        assert siblings  # the forks really left parents with several children
        assert {row[0] for row in every} == {"forks", "flips"}
        assert _snapshot_rows(saver, thread_snapshot_sql) == every
        for tid in ("forks", "flips"):
            assert _snapshot_rows(saver, thread_snapshot_sql, "AND c.thread_id IN (?)", [tid]) == [
                row for row in every if row[0] == tid]
            got = census.infer_cadences(saver, [tid], use_summary=False)[tid]
            scan = census.infer_cadences(saver, use_summary=False)[tid]
            assert (got.exact, got.lower_bound, got.snapshots) == (scan.exact, scan.lower_bound, scan.snapshots)
        assert census.infer_cadences(saver, ["forks"], use_summary=False)["forks"].exact == [3]
