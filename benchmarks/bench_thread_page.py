"""Thread page materialization vs LangGraph's own ``graph.get_state`` on the same saver and thread.

Cases: a long delta thread read by a delta-mode process, a long full thread
read by a full-mode process (the lineage gate runs there), and a migrated
and a markerless thread (delta rows without DeerFlow's marker) read by a
delta-mode process. For each, interleaved repeats of

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

from benchmarks.common import Context, runtime_for, scratch_database, served
from deerflow.convert.reclaim import reclaim_space
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


def _served_fns(client: Any, thread_id: str) -> dict[str, Any]:
    """The pages as served (Django's test client, whole middleware stack), each asserting a 200."""
    from django.urls import reverse

    from dashboard.threads.links import thread_url

    def get(path: str) -> Any:
        def call() -> None:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code, response.content[:300])
        return call

    return {"view": get(thread_url("threads:detail", thread_id)),
            "api": get(reverse("api:state", args=[thread_id])),
            "history": get(thread_url("thread-history", thread_id)),
            "list": get("/threads/")}


def _case(ctx: Context, name: str, rt: Any, thread_id: str, repeats: int) -> float:
    """Time one case; return the HTML page's median over ``get_state``'s (``thread_page_<name>_view_ratio``)."""
    from dashboard.threads import services

    graph = rt.accessor.graph  # LangGraph's compiled graph over the same saver
    head = dict(_config(thread_id))
    head["configurable"] = {**head["configurable"],
                            "checkpoint_id": rt.saver.get_tuple(head).config["configurable"]["checkpoint_id"]}
    get_state = {"get_state_live": lambda: graph.get_state(_config(thread_id)),
                 "get_state_at_id": lambda: graph.get_state(head)}
    medians = _interleaved({
        **get_state,
        "page": lambda: services.thread_summary(rt, thread_id, head=services.read_state(rt, thread_id)),
    }, repeats)
    with served(rt) as client:
        # get_state again beside the served pages: the view ratio compares figures of one interleaved run.
        pages = _interleaved({**get_state, **_served_fns(client, thread_id)}, repeats)
    # The cheaper of LangGraph's two ways to read the head is the baseline (the conservative ratio).
    medians["get_state"] = min(medians["get_state_live"], medians["get_state_at_id"])
    served_get_state = min(pages["get_state_live"], pages["get_state_at_id"])
    ratio = round(medians["page"] / medians["get_state"], 3)
    view_ratio = round(pages["view"] / served_get_state, 3)
    r = ctx.results
    r[f"thread_page_{name}_get_state_ms"] = medians["get_state"]
    r[f"thread_page_{name}_ms"] = medians["page"]
    r[f"thread_page_{name}_ratio"] = ratio
    for page in ("view", "api", "history", "list"):
        r[f"thread_page_{name}_{page}_ms"] = pages[page]
    r[f"thread_page_{name}_view_get_state_ms"] = served_get_state
    r[f"thread_page_{name}_view_ratio"] = view_ratio
    ctx.log(f"  {name}: get_state {medians['get_state']} ms, page {medians['page']} ms (x{ratio}); served: "
            f"HTML {pages['view']} ms (x{view_ratio} of get_state {served_get_state} ms), API {pages['api']} ms, "
            f"history {pages['history']} ms, list {pages['list']} ms")
    return view_ratio


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
        # What autovacuum does within a minute of a bulk load: statistics and the visibility map (without
        # them Postgres scans the whole table for a thread's namespaces instead of its primary-key range).
        reclaim_space(database)
        rt_delta, rt_full = runtime_for(database, "delta"), runtime_for(database, "full")
        try:
            ratios = [_case(ctx, "delta", rt_delta, threads["delta"][0], repeats),
                      _case(ctx, "full", rt_full, threads["full"][0], repeats)]
            for kind in ("migrated", "markerless"):  # from the mixed seed (markerless: delta rows, no marker)
                if kind in threads:
                    ratios.append(_case(ctx, kind, rt_delta, threads[kind][0], repeats))
        finally:
            rt_delta.close()
            rt_full.close()
    ctx.results["thread_page_ratio_vs_get_state"] = max(
        ctx.results[f"thread_page_{k}_ratio"] for k in ("delta", "full", "migrated") if k in threads)
    ctx.results["thread_page_view_ratio_vs_get_state"] = max(ratios)
