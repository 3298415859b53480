"""``/accounts/tokens/``: staff list, create and revoke API tokens (their own; superusers everyone's).

A new token's raw value is shown once, on the page the create redirects to
(kept in the session only until that page is rendered), never stored.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from dashboard.accounts.auth import staff_required
from dashboard.accounts.forms import ApiTokenCreateForm, ApiTokenRevokeForm
from dashboard.accounts.models import ApiToken
from dashboard.errors import ErrorView, error_page, invalid_parameters

__all__ = ["token_create", "token_list", "token_revoke", "tokens_for"]

_NEW_TOKEN_KEY = "dfa_new_api_token"


def tokens_for(user):
    """The tokens ``user`` may see and revoke: their own, or every token for a superuser (newest first)."""
    tokens = ApiToken.objects.select_related("user").order_by("-created_at", "-pk")
    return tokens if user.is_superuser else tokens.filter(user=user)


@require_GET
@staff_required
def token_list(request: HttpRequest) -> HttpResponse:
    """The token list, the create form, and a just-created token's raw value (once)."""
    return render(request, "accounts/tokens.html", {
        "tokens": list(tokens_for(request.user)), "form": ApiTokenCreateForm(),
        "new_token": request.session.pop(_NEW_TOKEN_KEY, None)})


@require_POST
@staff_required
def token_create(request: HttpRequest) -> HttpResponse:
    """Issue a token for the logged-in user, then redirect to the list that shows it once."""
    form = ApiTokenCreateForm(request.POST)
    if not form.is_valid():
        return error_page(request, invalid_parameters(form, what="token form"))
    token, raw = ApiToken.issue(request.user, name=form.cleaned_data["name"])
    request.session[_NEW_TOKEN_KEY] = {"id": token.pk, "raw": raw, "name": token.name}
    return redirect("tokens")


@require_POST
@staff_required
def token_revoke(request: HttpRequest) -> HttpResponse:
    """Revoke one of the tokens :func:`tokens_for` allows; 404 for any other id."""
    form = ApiTokenRevokeForm(request.POST)
    if not form.is_valid():
        return error_page(request, invalid_parameters(form, what="revoke form"))
    token = tokens_for(request.user).filter(pk=form.cleaned_data["token_id"]).first()
    if token is None:
        return error_page(request, ErrorView(404, "token_not_found", f"No API token {form.cleaned_data['token_id']} "
                                             "of yours exists.", "Pick a token from the list on /accounts/tokens/."))
    if token.revoked_at is None:
        token.revoke()
    return redirect("tokens")
