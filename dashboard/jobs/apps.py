from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Materialize-and-convert jobs: dry runs, conversions and reverts fanned out to delta-mode workers."""

    name = "dashboard.jobs"
    default_auto_field = "django.db.models.BigAutoField"
