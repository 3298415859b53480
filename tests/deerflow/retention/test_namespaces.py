"""Subgraph namespaces: a subgraph call's namespace goes with the root-graph checkpoint it started from."""

from __future__ import annotations

from deerflow.retention import keep_last
from deerflow.runtime.checkpoint_mode import inject_checkpoint_mode
from tests.deerflow.convert.support import human, subgraph_graph
from tests.deerflow.retention.support import all_keys, read, saver_for


def test_keep_last_deletes_the_namespaces_of_deleted_root_checkpoints(target):
    with saver_for(target) as saver:
        graph = subgraph_graph(saver, snapshot_frequency=3)
        for turn in range(4):
            graph.invoke({"messages": [human(turn)]},
                         inject_checkpoint_mode({"configurable": {"thread_id": "t"}}, "delta"), subgraphs=True)
    keys = all_keys(target, "t")
    namespaces = sorted({ns for ns, _ in keys if ns})
    assert len(namespaces) == 4 and all(":" in ns for ns in namespaces)
    before = read(target, "t")
    report = keep_last(target, "t", 2)
    assert report.status == "pruned", report.error
    after = all_keys(target, "t")
    kept_root = {cid for ns, cid in after if ns == ""}
    assert len(kept_root) == 2
    assert report.deleted_namespaces and set(report.deleted_namespaces) <= set(namespaces)
    assert not {ns for ns, _ in after} & set(report.deleted_namespaces)
    assert read(target, "t") == {k: v for k, v in before.items() if k in after}
