"""The demo-broker job benchmark runs end to end: a real worker on Kombu's filesystem broker takes a dry run
of 20 small threads in batches (the speed itself is the benchmark's key, not a test's)."""

from __future__ import annotations

import pytest

from benchmarks import bench_jobs
from benchmarks.common import Context

pytestmark = pytest.mark.slow


def test_a_job_of_small_threads_runs_to_the_end_on_the_demos_broker():
    ctx = Context(scale="small", log=lambda line: None)
    bench_jobs.run(ctx)  # asserts the job succeeded with every thread done
    rate = ctx.results["job_small_threads_per_s_demo"]
    assert isinstance(rate, float) and rate > 0
