"""Thread list and census at 1k / 10k / 100k threads: the summary vs the naive ``GROUP BY thread_id``.

One scratch database grows through the scales (seeded with
:func:`deerflow.seed.seed_threads`, mixed modes). At each scale:

* ``summary_build_s_<n>``: the first (full) build of the summary;
* ``list_page_ms_<n>``: median server time of :func:`deerflow.inventory.list_threads`
  (page of 50, freshness check included) over the first page and keyset
  pages at 10 %, 50 % and 90 % depth; ``list_page_view_ms_<n>``: the same
  through the JSON API view (auth, form, JSON); ``list_page_worst_ms_<n>``:
  the slowest of those and of filtered/sorted variants (mode, class, sort by
  bytes and by checkpoint count);
* ``list_naive_ms_<n>``: the pre-summary implementation (aggregate every
  checkpoint per request), ``list_speedup_vs_naive_<n>`` the ratio;
* ``census_s_<n>``: :func:`deerflow.inventory.class_counts` (one ``GROUP BY`` on
  the summary) vs ``census_naive_s_<n>`` (one aggregate over every checkpoint,
  classified in Python), and their ratio;
* ``audit_cadences_ms_<n>``: the audit's cadence findings from the summary's
  per-thread facts (:func:`deerflow.inventory.census.cadence_outliers`) vs
  ``audit_cadences_scan_ms_<n>``, the same findings from a scan of every
  checkpoint (what the audit did before), and their ratio.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from benchmarks.common import Context, median_ms, runtime_for, scratch_database, served, served_ms, timed
from benchmarks.naive_list import list_threads_naive, naive_sql
from deerflow import inventory
from deerflow.inventory import summary
from deerflow.seed import SeedPlan, seed_threads
from deerflow.storage import open_checkpointer, reader_for

PAGE = 50


def _seed_to(ctx: Context, database: Any, have: int, want: int) -> None:
    if want <= have:
        return
    plan = SeedPlan(threads=want - have, turns_min=1, turns_max=10, mode="mixed", snapshot_frequency=10,
                    seed=f"bench-list-{have}", templates=24, long_output_rate=0.01, text_scale=0.2,
                    batch_threads=2000)
    # summarize=False: the load alone is timed; _measure rebuilds the summary whole anyway.
    seconds, report = timed(lambda: seed_threads(database, plan, summarize=False))
    ctx.log(f"  seeded {report.threads} threads ({report.checkpoints} checkpoints, {report.bytes / 1e6:.0f} MB) "
            f"in {seconds:.1f} s")
    ctx.results[f"seed_threads_per_s_{label(want)}"] = round(report.threads / seconds, 1)
    ctx.results[f"seed_checkpoints_{label(want)}"] = (
        ctx.results.get(f"seed_checkpoints_{label(have)}", 0) + report.checkpoints)


def _cursors(saver: Any, n: int) -> list[str]:
    """Keyset cursors (default sort) starting pages at 10 %, 50 % and 90 % of the list."""
    reader = reader_for(saver)
    out = []
    for depth in (0.1, 0.5, 0.9):
        row = reader.query("SELECT last_checkpoint_id, thread_id FROM dfa_thread_summary "
                           f"ORDER BY last_checkpoint_id DESC, thread_id DESC LIMIT 1 OFFSET {int(n * depth)}")[0]
        out.append(inventory.encode_cursor(row["last_checkpoint_id"], row["thread_id"]))
    return out


def _view_ms(rt: Any, query: dict[str, str], repeats: int) -> float:
    from django.test import RequestFactory

    from dashboard.runtime import install_runtime
    from dashboard.threads import api

    class Staff:
        is_authenticated = is_staff = is_active = True

    previous = install_runtime(rt)
    try:
        def call() -> None:
            request = RequestFactory().get("/api/threads", query)
            request.user = Staff()
            response = api.thread_list(request)
            assert response.status_code == 200, response.content[:300]
        return median_ms(call, repeats)
    finally:
        install_runtime(previous)


def _served_pages(ctx: Context, rt: Any, k: str, repeats: int) -> None:
    """``audit_page_ms_<k>``, ``history_page_ms_<k>``, ``list_page_served_ms_<k>``: medians through the test client."""
    from dashboard.threads.links import thread_url

    largest = inventory.list_threads(rt.saver, limit=1, sort="checkpoints")[0][0].thread_id
    with served(rt) as client:
        ctx.results[f"audit_page_ms_{k}"] = served_ms(client, "/audit/", repeats)
        ctx.results[f"history_page_ms_{k}"] = served_ms(client, thread_url("thread-history", largest), repeats)
        ctx.results[f"list_page_served_ms_{k}"] = served_ms(client, "/threads/", repeats)


def _naive_census(saver: Any) -> dict[str, int]:
    reader = reader_for(saver)
    rows = reader.query(naive_sql(reader, ""))  # the pre-summary aggregate, once
    counts = Counter(inventory.summary_from_row(r).thread_class for r in rows)
    return {c: counts.get(c, 0) for c in inventory.THREAD_CLASSES}


def _scan_outliers(saver: Any, fleet: int) -> tuple[int, int]:
    """``(threads with several cadences, threads off the fleet's)`` from a scan of every checkpoint."""
    cadences = inventory.infer_cadences(saver, use_summary=False).values()
    return (sum(1 for c in cadences if len(c.exact) > 1),
            sum(1 for c in cadences if c.exact and any(k != fleet for k in c.exact)))


def label(n: int) -> str:
    """``1000`` -> ``"1k"`` (the key suffix)."""
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def _measure(ctx: Context, database: Any, n: int) -> None:
    r, k = ctx.results, label(n)
    repeats, naive_repeats = (15, 5) if n <= 10_000 else (15, 3)
    with open_checkpointer(database, pool_size=2) as saver:
        seconds, _ = timed(lambda: summary.refresh(saver, full=True))
        r[f"summary_build_s_{k}"] = round(seconds, 2)
        reader = reader_for(saver)
        with reader.autocommit() as auto:
            auto.execute("ANALYZE")  # what autovacuum would have done after the load
        cursors = _cursors(saver, n)
        pages = [median_ms(lambda: inventory.list_threads(saver, limit=PAGE), repeats)]
        pages += [median_ms(lambda c=c: inventory.list_threads(saver, limit=PAGE, cursor=c), repeats) for c in cursors]
        variants = [median_ms(lambda f=f: inventory.list_threads(saver, limit=PAGE, **f), repeats)
                    for f in ({"mode": "delta"}, {"thread_class": "migrated"}, {"sort": "bytes"},
                              {"sort": "checkpoints"}, {"mode": "full", "sort": "bytes"})]
        r[f"list_page_ms_{k}"] = round(statistics.median(pages), 3)
        r[f"list_page_worst_ms_{k}"] = max(pages + variants)
        naive = median_ms(lambda: list_threads_naive(saver, limit=PAGE), naive_repeats, warmup=0)
        r[f"list_naive_ms_{k}"] = naive
        r[f"list_speedup_vs_naive_{k}"] = round(naive / r[f"list_page_ms_{k}"], 1)
        assert inventory.class_counts(saver) == _naive_census(saver), "census disagrees with the naive aggregate"
        census = median_ms(lambda: inventory.class_counts(saver), repeats) / 1000
        census_naive = median_ms(lambda: _naive_census(saver), naive_repeats, warmup=0) / 1000
        r[f"census_s_{k}"] = round(census, 4)
        r[f"census_naive_s_{k}"] = round(census_naive, 3)
        r[f"census_speedup_vs_naive_{k}"] = round(census_naive / census, 1)
        fast = inventory.cadence_outliers(saver, 10)
        assert (fast.multiple, fast.differs) == _scan_outliers(saver, 10), "cadence facts disagree with a scan"
        r[f"audit_cadences_ms_{k}"] = median_ms(lambda: inventory.cadence_outliers(saver, 10), repeats)
        r[f"audit_cadences_scan_ms_{k}"] = median_ms(lambda: _scan_outliers(saver, 10), naive_repeats, warmup=0)
        r[f"audit_cadences_speedup_{k}"] = round(r[f"audit_cadences_scan_ms_{k}"] / r[f"audit_cadences_ms_{k}"], 1)
    rt = runtime_for(database, "delta")
    try:
        view = [_view_ms(rt, {"limit": str(PAGE)}, repeats)]
        view += [_view_ms(rt, {"limit": str(PAGE), "cursor": c}, repeats) for c in cursors]
        r[f"list_page_view_ms_{k}"] = round(statistics.median(view), 3)
        _served_pages(ctx, rt, k, repeats)
    finally:
        rt.close()
    ctx.log(f"  {n}: list {r[f'list_page_ms_{k}']} ms (view {r[f'list_page_view_ms_{k}']} ms, worst "
            f"{r[f'list_page_worst_ms_{k}']} ms) vs naive {naive} ms; census {census:.4f} s vs {census_naive:.3f} s; "
            f"audit cadences {r[f'audit_cadences_ms_{k}']} ms vs scan {r[f'audit_cadences_scan_ms_{k}']} ms; served: "
            f"audit {r[f'audit_page_ms_{k}']} ms, history {r[f'history_page_ms_{k}']} ms, "
            f"list {r[f'list_page_served_ms_{k}']} ms")


def run(ctx: Context) -> None:
    """Seed 1k, then 10k and 100k threads (full scale; small: 1k only) and measure at each size."""
    scales = [1_000, 10_000, 100_000] if ctx.full else [1_000]
    with scratch_database(ctx, "list") as database:
        have = 0
        for n in scales:
            ctx.log(f"list/census at {n} threads")
            _seed_to(ctx, database, have, n)
            have = n
            _measure(ctx, database, n)
