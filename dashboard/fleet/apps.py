from django.apps import AppConfig


class FleetConfig(AppConfig):
    """Fleet audit: process registry, live check, findings, census, readiness."""

    name = "dashboard.fleet"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the ``deerflow_facts`` remote-control command (workers answer the live check with it), and
        register each Celery worker once it is frozen (:data:`dashboard.celery.worker_frozen`)."""
        from dashboard.celery import worker_frozen
        from dashboard.fleet import control_command  # noqa: F401 - registration is the import
        from dashboard.fleet.registry import register_worker

        worker_frozen.connect(register_worker, dispatch_uid="dashboard.fleet.register_worker")
