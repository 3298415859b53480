"""Admin (superusers): API tokens, read-only (issue them with ``create_api_token``)."""

from __future__ import annotations

from django.contrib import admin

from dashboard.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens by prefix, owner and use; only revocation is changed here (the raw value is never stored)."""

    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = ("user", "name", "key_hash", "prefix", "created_at", "last_used_at")

    def has_add_permission(self, request) -> bool:
        return False
