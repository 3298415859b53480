from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Materialize-and-convert jobs: dry runs, conversions and reverts fanned out to delta-mode workers."""

    name = "dashboard.jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Inject the Celery dispatch task into the job services (``services`` never imports ``tasks``)."""
        from dashboard.jobs import services, tasks

        services.set_dispatcher(lambda job_id: tasks.dispatch.delay(job_id))
