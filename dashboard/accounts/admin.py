"""Admin (superusers): API tokens (issue them with ``create_api_token``) and the audit log of writes."""

from __future__ import annotations

from django.contrib import admin

from dashboard.accounts.models import ApiToken, AuditEntry


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens by prefix, owner and use; only revocation is changed here (the raw value is never stored)."""

    list_display = ("prefix", "user", "name", "scopes", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = ("user", "name", "key_hash", "prefix", "scopes", "created_at", "last_used_at")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """The audit log of writes, read-only: who, what, when, from where."""

    list_display = ("at", "username", "via", "token_prefix", "method", "path", "action", "status", "remote_addr")
    list_filter = ("via", "method", "status", "action")
    search_fields = ("username", "path", "remote_addr", "token_prefix")
    date_hierarchy = "at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)
