from __future__ import annotations

from typing import Any

from django.apps import AppConfig

# The converters, retention and LangGraph behind dashboard.jobs.pruning and .compaction take seconds to import
# (measured: about 5 s after django.setup()); a process that never shows a thread page or the fleet audit (a
# worker, a management command) must not pay it at start-up, so the providers below import them when first asked.


def _checkpoint_marks(job_id: int, thread_id: str) -> dict[str, Any] | None:
    from dashboard.jobs import pruning

    return pruning.checkpoint_marks(job_id, thread_id)


def _legacy_estimate(rt: Any, by_class: dict[str, dict[str, int]] | None) -> Any:
    from dashboard.jobs import compaction

    return compaction.legacy_estimate(rt, by_class)


def _settle_policy_run(sender: Any, job: Any, **kwargs: Any) -> None:
    """:data:`dashboard.jobs.signals.job_finished`'s receiver: a policy's run that pruned nothing keeps no job."""
    from dashboard.jobs import policies

    policies.settle_run(job)


def _send_dispatch_task(job_id: int) -> None:
    """Send Celery's ``jobs.dispatch`` for ``job_id``; the tasks are imported on the first launch."""
    from dashboard.jobs import tasks

    tasks.dispatch.delay(job_id)


class JobsConfig(AppConfig):
    """Materialize-and-convert jobs: dry runs, conversions and reverts fanned out to delta-mode workers."""

    name = "dashboard.jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Install the Celery sender in :mod:`dashboard.jobs.dispatching` (importing neither the services nor
        the tasks: a process that never launches a job never loads them), and what the jobs app shows on other
        apps' pages: a thread's jobs and a prune's marks (:mod:`dashboard.threads.extensions`), the bytes
        compaction would free (:mod:`dashboard.fleet.estimates`); and the policies' receiver of
        :data:`dashboard.jobs.signals.job_finished`."""
        from dashboard.fleet import estimates
        from dashboard.jobs import dispatching, provenance, signals
        from dashboard.threads import extensions

        dispatching.set_dispatcher(_send_dispatch_task)
        extensions.provide(extensions.ThreadExtensions(thread_jobs=provenance.thread_jobs,
                                                       checkpoint_marks=_checkpoint_marks))
        estimates.provide_legacy_estimate(_legacy_estimate)
        signals.job_finished.connect(_settle_policy_run, dispatch_uid="dashboard.jobs.settle_policy_run")
