from django.apps import AppConfig


class ThreadsConfig(AppConfig):
    """Thread browsing: list, thread page and the JSON API over the checkpoint database."""

    name = "dashboard.threads"
    default_auto_field = "django.db.models.BigAutoField"
