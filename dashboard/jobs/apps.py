from django.apps import AppConfig


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
        the tasks: a process that never launches a job never loads them)."""
        from dashboard.jobs import dispatching

        dispatching.set_dispatcher(_send_dispatch_task)
