"""Log in (staff only) and log out."""

from __future__ import annotations

from django.contrib.auth import views as auth_views

from dashboard.accounts.forms import LOGIN_FAILED_HINT, NOT_STAFF_HINT, StaffAuthenticationForm

__all__ = ["LoginView"]


class LoginView(auth_views.LoginView):
    """Django's login view with :class:`StaffAuthenticationForm` and the hints the page shows."""

    authentication_form = StaffAuthenticationForm
    extra_context = {"login_failed_hint": LOGIN_FAILED_HINT, "not_staff_hint": NOT_STAFF_HINT}
