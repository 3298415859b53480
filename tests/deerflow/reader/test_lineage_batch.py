"""deerflow.reader.lineage.replay_chains: a history page's replay walks in one query, equal to replay_chain for each.

Compared on every namespace of every thread of the real fixture (both
backends), and on Postgres copies damaged the ways the history page must
still mark (pruned snapshot ancestors, a dangling parent, a parent cycle, a
cleared parent link mid-thread, a stored ``None``).
"""

from __future__ import annotations

import psycopg
import pytest

from deerflow.reader.lineage import replay_chain, replay_chains
from deerflow.storage.savers import open_checkpointer
from deerflow.storage.sqlread import reader_for
from tests.backends import BACKENDS

THREAD = "delta-f10-9t"  # 27 root checkpoints, one snapshot at step 13


def _namespaces(saver) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for r in reader_for(saver).query(
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints ORDER BY 1, 2, 3 DESC"):
        out.setdefault((r["thread_id"], r["checkpoint_ns"]), []).append(r["checkpoint_id"])
    return out


def _assert_same(saver, thread_id: str, ns: str, ids: list[str]) -> dict:
    got = replay_chains(saver, thread_id, ns, ids)
    assert got == {cid: replay_chain(saver, thread_id, ns, cid) for cid in ids}
    return got


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_page_of_the_real_fixture_walks_as_one_by_one(backend, request):
    database = request.getfixturevalue(f"{backend}_fixture_db")
    with open_checkpointer(database) as saver:
        spaces = _namespaces(saver)
        assert len(spaces) > 10
        for (thread_id, ns), ids in spaces.items():
            for start in range(0, len(ids), 25):  # pages of 25 as the history shows them
                _assert_same(saver, thread_id, ns, ids[start:start + 26])
        assert replay_chains(saver, THREAD, "", []) == {}
        missing = _assert_same(saver, THREAD, "", ["no-such-checkpoint"])["no-such-checkpoint"]
        assert missing.checkpoint_ids == () and missing.gap is None


def _ids(conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND "
                                       "checkpoint_ns = '' ORDER BY checkpoint_id", (THREAD,))]


@pytest.mark.postgres
@pytest.mark.parametrize("damage", ["pruned", "dangling", "cycle", "cleared", "stored_none"])
def test_damaged_chains_walk_as_one_by_one_on_postgres(postgres_fixture_db_rw, damage):
    with psycopg.connect(postgres_fixture_db_rw.postgres_url, autocommit=True) as conn:
        ids = _ids(conn)
        if damage == "pruned":
            for table in ("checkpoint_writes", "checkpoints"):
                conn.execute(f"DELETE FROM {table} WHERE thread_id = %s AND checkpoint_id < %s",
                             (THREAD, ids[-3]))
        elif damage == "dangling":
            conn.execute("UPDATE checkpoints SET parent_checkpoint_id = 'gone' WHERE thread_id = %s AND "
                         "checkpoint_id = %s", (THREAD, ids[-5]))
        elif damage == "cycle":
            conn.execute("UPDATE checkpoints SET parent_checkpoint_id = %s WHERE thread_id = %s AND "
                         "checkpoint_id = %s", (ids[-2], THREAD, ids[-4]))
        elif damage == "cleared":
            conn.execute("UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = %s AND "
                         "checkpoint_id = %s", (THREAD, ids[-6]))
        else:
            conn.execute("UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, "
                         "'{channel_values,messages}', 'null'::jsonb, true) "
                         "WHERE thread_id = %s AND checkpoint_id = %s", (THREAD, ids[-3]))
        ids = _ids(conn)
    with open_checkpointer(postgres_fixture_db_rw) as saver:
        got = _assert_same(saver, THREAD, "", list(reversed(ids)))
        # the page order does not matter, nor a page holding only part of a walk
        assert _assert_same(saver, THREAD, "", ids[-3:]) == {cid: got[cid] for cid in ids[-3:]}
    if damage == "stored_none":
        assert any(chain.stored_none for chain in got.values())
    else:
        assert any(chain.gap is not None for chain in got.values())


# -- branch_points(among=...): a single read's question, without grouping the whole namespace -----------------

FORKED = ["delta-f10-fork", "delta-f10-fork-from-input", "delta-f10-fanout", "delta-f10-resume-linearized",
          "delta-f10-subgraph", "delta-f10-9t"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_branch_points_among_ancestors_are_the_namespaces_branch_points_among_them(backend, request):
    from deerflow.reader.lineage import branch_points
    from tests import fixtures_real

    database = request.getfixturevalue(f"{backend}_fixture_db")
    manifest = fixtures_real.manifest_threads()
    compared = found = 0
    with open_checkpointer(database) as saver:
        for thread_id in FORKED:
            checkpoints = manifest[thread_id]["backends"][backend]["checkpoints"]
            for ns in {c["checkpoint_ns"] for c in checkpoints}:
                parent = {c["checkpoint_id"]: c["parent_checkpoint_id"] for c in checkpoints
                          if c["checkpoint_ns"] == ns}
                everywhere = branch_points(saver, thread_id, ns)
                assert branch_points(saver, thread_id, ns, among=list(parent)) == everywhere
                assert branch_points(saver, thread_id, ns, among=[]) == frozenset()
                for cid in parent:
                    ancestors, at = [], parent[cid]
                    while at is not None and at in parent and at not in ancestors:
                        ancestors.append(at)
                        at = parent[at]
                    got = branch_points(saver, thread_id, ns, among=ancestors)
                    assert got == everywhere & set(ancestors), (thread_id, ns, cid)
                    compared += 1
                    found += len(got)
    assert compared > 100 and found > 0  # the forks' branch points were among the ancestors asked about


@pytest.mark.parametrize("backend", BACKENDS)
def test_more_candidates_than_a_statement_holds_give_the_same_intersection(backend, request, monkeypatch):
    from deerflow.reader import lineage

    database = request.getfixturevalue(f"{backend}_fixture_db")
    with open_checkpointer(database) as saver:
        everywhere = lineage.branch_points(saver, "delta-f10-fork", "")
        assert everywhere
        candidates = [*everywhere, *(f"not-a-checkpoint-{i}" for i in range(2 * lineage.AMONG_MAX))]
        assert lineage.branch_points(saver, "delta-f10-fork", "", among=candidates) == everywhere
        some = sorted(everywhere)[:1] + candidates[len(everywhere):]
        assert lineage.branch_points(saver, "delta-f10-fork", "", among=some) == frozenset(some[:1])
        monkeypatch.setattr(lineage, "AMONG_MAX", 10 ** 6)  # the same candidates in one statement
        assert lineage.branch_points(saver, "delta-f10-fork", "", among=candidates) == everywhere
