"""DeerFlow Checkpoint Admin: the Django project (settings, URLs, Celery app)."""

from dashboard.celery import app as celery_app

__all__ = ["celery_app"]
