"""Write a benchmark run to ``benchmarks/results/latest.json`` and ``latest.md`` (and a dated copy of the JSON).

Only a complete full-scale run writes ``latest.*``, the committed figures the
README quotes; a small-scale run or a subset (``--only``) writes
``latest-<scale>[-<names>].json`` and ``.md`` beside them instead (not
committed: .gitignore), so a quick check never overwrites them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["REQUIRED_KEYS", "RESULTS_DIR", "latest_name", "write_report"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: The keys the issues ask for (medians), with the target each is read against.
REQUIRED_KEYS = {
    "list_page_ms_100k": "< 50 ms",
    "list_speedup_vs_naive_100k": ">= 20x",
    "census_s_100k": "< 1 s",
    "thread_page_ratio_vs_get_state": "<= 1.2",
    "convert_speedup_vs_naive": ">= 10x",
    "convert_ratio_to_write_floor": "<= 2",
    "convert_integrity_ratio_to_write_floor": "<= 2",
    "compact_ratio_to_write_floor": "<= 2",
    # issue 16, item 2: the 2,000-turn thread near the floor (compaction: its input is ten times its output)
    "convert_2000t_ratio_to_write_floor": "<= 2",
    "compact_2000t_ratio_to_write_floor": "<= 2",
    "compact_2000t_ratio_to_io_floor": "(floor: read the input + write the output)",
    "compact_bytes_after_over_before_2000t": "< 0.05",
    "compact_peak_over_largest_state_2000t": "small multiple",
    "convert_peak_rss_mb_2000t": "small multiple of the largest state",
    "convert_largest_state_mb_2000t": "(reference for the line above)",
    "convert_threads_per_s_1w": "",
    "convert_threads_per_s_2w": "",
    "prune_threads_per_s_100k": "",
    "prune_ratio_to_delete_floor": "",
    # retention beside LangGraph's own prune; pages that never wait for a live check
    "prune_full_ratio_vs_langgraph": "<= 1.2",
    "prune_full_backup_ratio_vs_langgraph": "<= 2.5",
    "prune_delta_ratio_to_floor": "<= 2.5",
    "prune_threads_per_s_100k_2_workers": ">= 60",
    "job_small_threads_per_s_demo": ">= 10",
    "audit_page_ms_live": "< 300 ms",
    "job_page_ms_live": "< 300 ms",
    "metrics_ms": "< 300 ms",
    # issue 16, item 3: the pages as served
    "thread_page_view_ratio_vs_get_state": "<= 2",
    "audit_page_ms_100k": "< 200 ms",
    "history_page_ms_100k": "< 50 ms",
}


def _shown(results: dict[str, Any], key: str) -> Any:
    value = results.get(key, "not measured")
    if key.startswith("convert_peak_rss_mb_") and results.get(key.replace("_rss_mb_", "_rss_capped_")):
        return f">= {value} (child stopped at this resident-set cap)"
    return value


def _rows(results: dict[str, Any], keys: list[str]) -> list[str]:
    return [f"| `{k}` | {_shown(results, k)} | {REQUIRED_KEYS.get(k, '')} |" for k in keys]


def latest_name(scale: str, only: list[str] | tuple[str, ...] = ()) -> str:
    """The stem of the two result files: ``"latest"`` for a complete full-scale run.

    Args:
        scale: ``"full"`` or ``"small"``.
        only: the benchmarks run, if a subset (empty: all).

    Returns:
        ``"latest"``, or e.g. ``"latest-small"``, ``"latest-full-thread_page"``.
    """
    if scale == "full" and not only:
        return "latest"
    return "-".join(["latest", scale, *only])


def write_report(run: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``run`` (``{"machine", "scale", "results", "notes", "seconds"}``, optional ``"only"``).

    Returns:
        The JSON and markdown paths: ``RESULTS_DIR/{latest_name(scale, only)}.json`` and ``.md``.
    """
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    results = run["results"]
    text = json.dumps(run, indent=2, sort_keys=True, default=str)
    stem = latest_name(run["scale"], run.get("only") or ())
    json_path = RESULTS_DIR / f"{stem}.json"
    json_path.write_text(text + "\n", encoding="utf-8")
    stamp = run["machine"]["date"].replace(":", "").replace("-", "")[:15]
    label = "full" if stem == "latest" else stem.removeprefix("latest-")
    (RESULTS_DIR / f"run-{stamp}-{label}.json").write_text(text + "\n", encoding="utf-8")
    machine = run["machine"]
    lines = [
        f"# Benchmarks ({run['scale']} scale, {machine['date']})",
        "",
        f"Machine: {machine['nproc']} cores ({machine['cpu_model']}), {machine['memory_gb']} GB RAM, load average "
        f"at start {machine['load_average_at_start']}; Python {machine['python']}, PostgreSQL {machine['postgres']} "
        f"(shared_buffers {machine['postgres_shared_buffers']}), SQLite {machine['sqlite']}, langgraph "
        f"{machine['langgraph']}, langgraph-checkpoint-postgres {machine['langgraph-checkpoint-postgres']}, "
        f"psycopg {machine['psycopg']}, Django {machine['Django']}. Total run: {run['seconds']:.0f} s.",
        "",
        "Every figure is a median of repeated runs; every ratio compares two figures measured side by side in this "
        "run on the same scratch database (created and dropped by the run).",
        "",
        "## Issue keys",
        "",
        "| key | value | target |",
        "|---|---|---|",
        *_rows(results, list(REQUIRED_KEYS)),
        "",
        "## Everything measured",
        "",
        "| key | value |",
        "|---|---|",
        *[f"| `{k}` | {v} |" for k, v in sorted(results.items())],
        "",
    ]
    if run.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in run["notes"]], ""]
    md_path = RESULTS_DIR / f"{stem}.md"
    md_path.write_text("\n".join(lines), encoding="utf-8")
    return json_path, md_path
