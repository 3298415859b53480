"""Where a benchmark run's report goes: only a complete full-scale run replaces the committed ``latest.*``."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks import report
from tests.integration import helpers


def _run(scale: str, only: list[str]) -> dict:
    return {"scale": scale, "only": only, "results": {"thread_page_ratio_vs_get_state": 1.17}, "notes": [],
            "seconds": 3.0, "machine": {"date": "2026-12-01T02:41:24+00:00", "nproc": 2, "cpu_model": "cpu",
                                        "memory_gb": 8, "load_average_at_start": 0.1, "python": "3.11",
                                        "postgres": "16", "postgres_shared_buffers": "128MB", "sqlite": "3.40",
                                        "langgraph": "1.2", "langgraph-checkpoint-postgres": "3.1",
                                        "psycopg": "3.2", "Django": "5.2"}}


@pytest.mark.parametrize(("scale", "only", "stem", "dated"), [
    ("full", [], "latest", "run-20261201T024124-full.json"),
    ("small", [], "latest-small", "run-20261201T024124-small.json"),
    ("full", ["thread_page"], "latest-full-thread_page", "run-20261201T024124-full-thread_page.json"),
    ("small", ["list", "convert"], "latest-small-list-convert", "run-20261201T024124-small-list-convert.json"),
])
def test_report_paths(tmp_path, monkeypatch, scale, only, stem, dated):
    monkeypatch.setattr(report, "RESULTS_DIR", tmp_path)
    json_path, md_path = report.write_report(_run(scale, only))
    assert (json_path.name, md_path.name) == (f"{stem}.json", f"{stem}.md")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{stem}.json", f"{stem}.md", dated])
    assert json.loads(json_path.read_text())["results"] == {"thread_page_ratio_vs_get_state": 1.17}
    assert f"# Benchmarks ({scale} scale, 2026-12-01T02:41:24+00:00)" in md_path.read_text()


def test_quick_runs_are_not_committed():
    """git ignores what a small or subset run writes, and not what a complete full run writes."""
    names = ["latest-small.json", "latest-full-thread_page.md", "run-20261201T024124-small.json",
             "run-20261201T024124-full-thread_page.json", "latest.json", "run-20261201T024124-full.json"]
    proc = subprocess.run(["git", "check-ignore", *(f"benchmarks/results/{n}" for n in names)],
                          cwd=helpers.REPO_ROOT, capture_output=True, text=True)
    assert proc.stdout.split() == [f"benchmarks/results/{n}" for n in names[:4]]
