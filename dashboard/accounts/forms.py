"""The login form: staff accounts only, refused at login rather than after it."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

__all__ = ["LOGIN_FAILED", "LOGIN_FAILED_HINT", "NOT_STAFF_HINT", "StaffAuthenticationForm"]

#: The one message for a wrong password and for a non-staff account (the page says which accounts may log in).
LOGIN_FAILED = "Your username and password didn't match, or the account is not staff."
#: What to do after :data:`LOGIN_FAILED`.
LOGIN_FAILED_HINT = ("Check both fields (they are case-sensitive). Only staff accounts may use this dashboard; "
                     "ask an administrator to mark your account as staff.")
#: What to do when the session belongs to a non-staff account (shown on the login page).
NOT_STAFF_HINT = ("Log out, then log in with a staff account (or ask an administrator to mark your account "
                  "as staff).")


class StaffAuthenticationForm(AuthenticationForm):
    """Django's login form that also refuses a valid but non-staff account, so it is never logged in.

    Without this, a non-staff login succeeded and every page then sent the
    user back to the login page, with no explanation.
    """

    error_messages = {**AuthenticationForm.error_messages, "invalid_login": LOGIN_FAILED, "not_staff": LOGIN_FAILED}

    def confirm_login_allowed(self, user) -> None:
        """Refuse inactive (Django's check) and non-staff accounts."""
        super().confirm_login_allowed(user)
        if not user.is_staff:
            raise ValidationError(self.error_messages["not_staff"], code="not_staff")


class ApiTokenCreateForm(forms.Form):
    """``/accounts/tokens/``: a new API token's label (what it is for)."""

    name = forms.CharField(max_length=100, required=False, strip=True, label="What it is for",
                           help_text="e.g. 'nightly export'; shown in the list, never part of the token")


class ApiTokenRevokeForm(forms.Form):
    """``/accounts/tokens/revoke``: which token (its id in the list)."""

    token_id = forms.IntegerField(min_value=1)
