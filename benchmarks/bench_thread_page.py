"""Thread page materialization vs LangGraph's own ``graph.get_state`` on the same saver and thread.

Cases: a long delta thread read by a delta-mode process, a long full thread
read by a full-mode process (the lineage gate runs there), and a migrated
thread read by a delta-mode process. For each, interleaved repeats of

* ``get_state``: the accessor's compiled graph's ``get_state`` (LangGraph alone), the
  cheaper of reading the head by thread (``live``) or by its resolved checkpoint id;
* ``page``: what the thread page costs before rendering -- ``services.read_state``
  (drift check, gates, lineage checks, materialization) plus
  ``services.thread_summary`` for the head it read (the thread's inventory row);

and ``thread_page_ratio_vs_get_state`` is the worst case's median ratio. The
full page through the view (template, storage chart) is reported beside it.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

from benchmarks.common import Context, runtime_for, scratch_database
from deerflow.seed import SeedPlan, seed_threads


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _interleaved(fns: dict[str, Any], repeats: int) -> dict[str, float]:
    """Median milliseconds of each function, calls interleaved so drift hits all alike.

    The collector runs between rounds, not inside a timed call (one caller's
    garbage must not be charged to the next).
    """
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()  # warm up
    gc.disable()
    try:
        for i in range(repeats):
            order = list(fns.items()) if i % 2 == 0 else list(reversed(fns.items()))
            for name, fn in order:
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
            gc.collect()
    finally:
        gc.enable()
    return {k: round(statistics.median(v) * 1000, 3) for k, v in times.items()}


def _view(rt: Any, thread_id: str) -> Any:
    from django.test import RequestFactory

    from dashboard.runtime import install_runtime
    from dashboard.threads import views

    class Staff:
        is_authenticated = is_staff = is_active = True

    def call() -> None:
        previous = install_runtime(rt)
        try:
            request = RequestFactory().get(f"/threads/{thread_id}/")
            request.user = Staff()
            request.htmx = False
            response = views._thread_detail(request, thread_id)
            assert response.status_code == 200, response.content[:300]
        finally:
            install_runtime(previous)
    return call


def _case(ctx: Context, name: str, rt: Any, thread_id: str, repeats: int) -> float:
    from dashboard.threads import services

    graph = rt.accessor.graph  # LangGraph's compiled graph over the same saver
    head = dict(_config(thread_id))
    head["configurable"] = {**head["configurable"],
                            "checkpoint_id": rt.saver.get_tuple(head).config["configurable"]["checkpoint_id"]}
    medians = _interleaved({
        "get_state_live": lambda: graph.get_state(_config(thread_id)),
        "get_state_at_id": lambda: graph.get_state(head),
        "page": lambda: services.thread_summary(rt, thread_id, head=services.read_state(rt, thread_id)),
    }, repeats)
    medians["view"] = _interleaved({"view": _view(rt, thread_id)}, max(5, repeats // 3))["view"]
    # The cheaper of LangGraph's two ways to read the head is the baseline (the conservative ratio).
    medians["get_state"] = min(medians["get_state_live"], medians["get_state_at_id"])
    ratio = round(medians["page"] / medians["get_state"], 3)
    ctx.results[f"thread_page_{name}_get_state_ms"] = medians["get_state"]
    ctx.results[f"thread_page_{name}_ms"] = medians["page"]
    ctx.results[f"thread_page_{name}_view_ms"] = medians["view"]
    ctx.results[f"thread_page_{name}_ratio"] = ratio
    ctx.log(f"  {name}: get_state {medians['get_state']} ms, page {medians['page']} ms (x{ratio}), "
            f"whole view {medians['view']} ms")
    return ratio


def run(ctx: Context) -> None:
    """Seed one long thread per kind and compare; the worst ratio is the headline."""
    turns = 120 if ctx.full else 40
    repeats = 41 if ctx.full else 15
    with scratch_database(ctx, "page") as database:
        threads = {}
        for kind in ("delta", "full", "mixed"):
            report = seed_threads(database, SeedPlan(threads=40 if kind == "mixed" else 4, turns_min=turns,
                                                     turns_max=turns, mode=kind,
                                                     snapshot_frequency=10, seed=f"page-{kind}", templates=4,
                                                     fork_rate=0, text_scale=0.5))
            for sample in report.samples:
                threads.setdefault(sample.kind, (sample.thread_id, sample.checkpoints))
        ctx.results["thread_page_checkpoints"] = {k: v[1] for k, v in threads.items()}
        rt_delta, rt_full = runtime_for(database, "delta"), runtime_for(database, "full")
        try:
            ratios = [_case(ctx, "delta", rt_delta, threads["delta"][0], repeats),
                      _case(ctx, "full", rt_full, threads["full"][0], repeats)]
            if "migrated" in threads:
                ratios.append(_case(ctx, "migrated", rt_delta, threads["migrated"][0], repeats))
        finally:
            rt_delta.close()
            rt_full.close()
    ctx.results["thread_page_ratio_vs_get_state"] = max(ratios)
