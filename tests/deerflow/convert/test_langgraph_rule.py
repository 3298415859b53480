"""LangGraph's read rule replayed along the tree (deerflow.convert.langgraph_rule) equals LangGraph's own reader.

The integrity checks read every checkpoint by the replayed rule and only a
sample through ``graph.get_state``; this proves the rule gives the real
reader's value (or fails where it fails) at every checkpoint: on every thread
of the real fixture (a sample of each thread in the fast tier, the rest in the
slow sweep) and on hand-built stored-``None`` threads (where the SQLite and
Postgres readers take different seeds), on real SQLite and Postgres savers.
"""

from __future__ import annotations

import pytest

from deerflow.convert.delta_reader import delta_accessor, read_digest
from deerflow.convert.encoding import MessageDigester
from deerflow.convert.langgraph_rule import LangGraphRule, sample_points
from deerflow.storage.sessions import open_session
from tests.deerflow.convert.support import agent_graph, config_for, human, open_saver, run_turn

#: Real reads of these threads (1,200 checkpoints at K=100, 752 at K=10) take minutes per backend on a loaded
#: machine.
LONG = {"delta-f100-150t": 1200, "delta-f10-200t": 752}
#: The fast tier reads every ``STRIDE``-th checkpoint of a thread (every ``LONG_STRIDE``-th of the long ones)
#: and the last; the slow sweep reads all the others, so ``make test`` compares every checkpoint once.
STRIDE, LONG_STRIDE = 5, 25


def _stride(thread_id: str) -> int:
    """The fast tier's stride through a thread's checkpoints."""
    return LONG_STRIDE if thread_id in LONG else STRIDE


def _in_sample(i: int, count: int, stride: int) -> bool:
    """Whether the fast tier reads the ``i``-th of a thread's ``count`` checkpoints (sorted by id)."""
    return i % stride == 0 or i == count - 1


#: The slow sweep is cut into this many tests, so pytest-xdist spreads it over its workers.
REST_PARTS = 4


def _compared(i: int, count: int, stride: int, part: int | None) -> bool:
    """Whether the ``i``-th of ``count`` checkpoints is compared in the sample (``part=None``) or in slow part
    ``part`` (the checkpoints outside the sample, dealt round-robin over :data:`REST_PARTS`)."""
    if part is None:
        return _in_sample(i, count, stride)
    return not _in_sample(i, count, stride) and i % REST_PARTS == part


def _rule_and_real(db, thread_id: str, *, stride: int, part: int | None) -> tuple[dict, dict]:
    """The rule's and LangGraph's reading of the thread's checkpoints compared in ``part`` (``None``: the sample)."""
    digest = MessageDigester()
    with open_session(db, write=False) as session:
        rule = {(r.checkpoint_ns, r.checkpoint_id): (r.digest, r.error is None)
                for r in LangGraphRule(session.saver, digest).read_thread(session, thread_id)}
        accessor = delta_accessor(session.saver)
        real = {}
        for i, (ns, cid) in enumerate(sorted(rule)):
            if _compared(i, len(rule), stride, part):
                got, error = read_digest(accessor, thread_id, ns, cid, digest)
                real[(ns, cid)] = (got, error is None)
    return {k: rule[k] for k in real}, real


def _sweep(db, manifest, *, part: int | None) -> int:
    """Compare the sample (``part=None``) or slow part ``part`` of every manifest thread; the number compared."""
    compared = 0
    for thread in manifest["threads"]:
        thread_id = thread["thread_id"]
        stride = _stride(thread_id)
        count = len(thread["backends"][db.backend]["checkpoints"])
        rule, real = _rule_and_real(db, thread_id, stride=stride, part=part)
        assert rule == real, (thread_id, [(k, rule[k], real[k]) for k in real if rule[k] != real[k]][:3])
        assert len(real) == sum(_compared(i, count, stride, part) for i in range(count)), thread_id
        compared += len(real)
    return compared


def test_the_rule_reads_a_sample_of_every_fixture_thread_as_langgraph_does(fixture_backend, manifest):
    _backend, db = fixture_backend
    assert _sweep(db, manifest, part=None) == _sweep_count(manifest, db.backend) > 300


@pytest.mark.slow
@pytest.mark.parametrize("part", range(REST_PARTS), ids=[f"part{i}" for i in range(REST_PARTS)])
def test_the_rule_reads_every_other_fixture_checkpoint_as_langgraph_does(fixture_backend, manifest, part):
    _backend, db = fixture_backend
    counts = [(t["thread_id"], len(t["backends"][db.backend]["checkpoints"])) for t in manifest["threads"]]
    in_part = [sum(_compared(i, count, _stride(tid), p) for tid, count in counts for i in range(count))
               for p in range(REST_PARTS)]
    assert _sweep(db, manifest, part=part) == in_part[part] > 0
    # the sample and the parts cover every checkpoint exactly once, the parts in near-equal shares
    assert _sweep_count(manifest, db.backend) + sum(in_part) == sum(count for _, count in counts)
    assert max(in_part) - min(in_part) <= len(counts)


def _sweep_count(manifest, backend: str) -> int:
    """How many checkpoints the fast tier's sample holds (the slow sweep reads the rest)."""
    return sum(_in_sample(i, len(t["backends"][backend]["checkpoints"]), _stride(t["thread_id"]))
               for t in manifest["threads"] for i in range(len(t["backends"][backend]["checkpoints"])))


def _stored_none(db, thread_id: str, at: float) -> str:
    """Six turns; then one checkpoint at fraction ``at`` of the thread is re-stored with ``messages = None``."""
    with open_saver(db) as saver:
        graph = agent_graph(saver, snapshot_frequency=4, tool_every=2)
        for t in range(6):
            run_turn(graph, thread_id, human(t))
        tuples = list(reversed(list(saver.list(config_for(thread_id)))))
        victim = tuples[int(len(tuples) * at)]
        checkpoint = {**victim.checkpoint, "channel_values": {**victim.checkpoint["channel_values"], "messages": None}}
        saver.put(config_for(thread_id, victim.parent_config["configurable"]["checkpoint_id"]), checkpoint,
                  victim.metadata, {})
    return victim.config["configurable"]["checkpoint_id"]


def test_a_stored_none_reads_as_each_savers_reader_reads_it(scratch_db):
    """SQLite (and LangGraph's base reader) restart from ``[]`` below a stored ``None``; Postgres passes it."""
    for thread_id, at in (("early", 0.2), ("middle", 0.5), ("late", 0.9)):
        victim = _stored_none(scratch_db, thread_id, at)
        rule, real = _rule_and_real(scratch_db, thread_id, stride=1, part=None)  # every checkpoint
        assert rule == real
        assert len(real) > 20 and all(ok for _digest, ok in real.values())
        assert ("", victim) in real


def test_sample_points_take_every_head_the_extras_and_a_spread():
    order = [("", f"c{i:03d}") for i in range(40)] + [("sub", f"s{i:02d}") for i in range(5)]
    points = sample_points(order, extra=[("", "c007")], spread=3)
    assert ("", "c039") in points and ("sub", "s04") in points and ("", "c007") in points
    assert len(points) == 6 and points == sorted(set(points))
    assert sample_points([], spread=3) == []
