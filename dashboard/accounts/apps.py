from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Staff access: sessions for pages, hashed bearer tokens for the API."""

    name = "dashboard.accounts"
    default_auto_field = "django.db.models.BigAutoField"
