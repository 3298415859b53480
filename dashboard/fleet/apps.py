from django.apps import AppConfig


class FleetConfig(AppConfig):
    """Fleet audit: process registry, live check, findings, census, readiness."""

    name = "dashboard.fleet"
    default_auto_field = "django.db.models.BigAutoField"
