"""The jobs app's signals (a module that imports nothing of the app, so any module may send or connect)."""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["job_finished"]

#: Sent once, when a job reaches its final state (``sender``: ``ConversionJob``; keyword ``job``: the job),
#: by :func:`dashboard.jobs.batches.claim_batch`. The retention policies connect to it
#: (:func:`dashboard.jobs.policies.settle_run`) in ``JobsConfig.ready``.
job_finished = Signal()
