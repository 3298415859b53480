"""The retention benchmarks beside LangGraph's own prune run end to end at small scale: every prune they time
reports ``pruned`` (``_ours`` asserts it), the delta side goes through the batch path, and each key is the
median of its runs (the speed itself is the benchmark's key, not a test's)."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.postgres import PostgresSaver

import deerflow.retention.batch as batch_module
from benchmarks import bench_prune_peer
from benchmarks.common import Context
from deerflow.retention.delegate import saver_prunes

pytestmark = pytest.mark.slow


def test_the_delta_and_full_comparisons_run_and_the_delta_threads_go_in_one_batch(monkeypatch):
    alone: list[str] = []
    real = batch_module.prune_thread
    monkeypatch.setattr(batch_module, "prune_thread",
                        lambda target, thread_id, *a, **k: alone.append(thread_id) or real(target, thread_id, *a, **k))
    ctx = Context(scale="small", log=lambda line: None)
    bench_prune_peer._delta(ctx)
    assert alone == []  # the delta threads' chain starts are snapshots: no thread went alone
    r = ctx.results
    assert r["prune_delta_s"] > 0 and r["prune_delta_floor_s"] > 0
    assert r["prune_delta_ratio_to_floor"] == pytest.approx(r["prune_delta_s"] / r["prune_delta_floor_s"], rel=0.05)
    if not saver_prunes(PostgresSaver):
        return  # this langgraph-checkpoint-postgres has no prune to compare with (3.2 added it)
    bench_prune_peer._full(ctx)
    assert r["prune_full_checkpoints"] > 1000
    full = r["prune_full_s"] / r["prune_full_langgraph_s"]
    assert r["prune_full_ratio_vs_langgraph"] == pytest.approx(full, rel=0.05)
