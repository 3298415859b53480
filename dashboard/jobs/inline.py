"""The in-process runner of ``convert_threads`` and friends: the Celery loop in one process (:func:`run_inline`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from dashboard.errors.jobs import (
    TransientDatabaseError,
)
from dashboard.jobs.batches import claim_batch
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.running import Run, record_failure, run_thread

__all__ = ["run_inline"]

log = logging.getLogger("dashboard.jobs")


# -- in-process runner (management command) ----------------------------------
def run_inline(job: ConversionJob, *, on_result: Callable[[ThreadResult], None] | None = None,
               sleep: Callable[[float], None] = time.sleep) -> ConversionJob:
    """Run a job to the end in this process, one thread at a time, with the same claims and records.

    Stops early when the job is paused or cancelled from elsewhere (pages, API).
    ``on_result`` is called with each finished row (progress bars).
    """
    while True:
        batch = claim_batch(job.pk)
        if not batch.sends:
            break
        for send in batch.sends:
            if send.countdown:
                sleep(job.throttle_delay_s)
            for result_id in send.result_ids:
                run = _run_with_retries(result_id, sleep)
                if on_result is not None and run is not None and run.ran:
                    on_result(run.result)
    job.refresh_from_db()
    return job


def _run_with_retries(result_id: int, sleep: Callable[[float], None], tries: int = 3) -> Run | None:
    """:func:`run_thread` with the Celery task's policy: transient errors retried with backoff, then recorded."""
    for attempt in range(tries):
        try:
            return run_thread(result_id, worker_node="inline")
        except TransientDatabaseError as exc:
            if attempt == tries - 1:
                record_failure(result_id, exc)
                return None
            sleep(2.0 ** attempt)
    return None
