"""Authentication backend for API bearer tokens, so token failures are counted like login failures."""

from __future__ import annotations

from django.http import HttpRequest

from dashboard.accounts.models import ApiToken

__all__ = ["ApiTokenBackend"]


class ApiTokenBackend:
    """``authenticate(request, api_token=raw)``: the token's user, or ``None``.

    Going through :func:`django.contrib.auth.authenticate` puts a bad token
    through the same throttle as a bad password (django-axes' backend runs
    first and refuses a locked-out client; Django sends ``user_login_failed``
    on failure, with the token masked). The token row is left on
    ``request.api_token`` for scope checks.
    """

    def authenticate(self, request: HttpRequest | None, api_token: str | None = None, **kwargs):
        if api_token is None:
            return None
        token = ApiToken.authenticate_token(api_token)
        if token is None:
            return None
        if request is not None:
            request.api_token = token  # type: ignore[attr-defined]  # read back by audit and scope checks
        return token.user

    def get_user(self, user_id):
        return None  # tokens never start a session
