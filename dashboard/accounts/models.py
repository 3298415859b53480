"""API tokens (stored as SHA-256 hashes, shown once, scoped, expiring, revocable) and the audit log of writes."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "dfa_"


class Scope(models.TextChoices):
    """What a token may do, on top of its user's permissions (a scope never grants a permission)."""

    READ = "read", "read: every GET of the API"
    HEARTBEAT = "heartbeat", "heartbeat: POST /api/processes/heartbeat (with fleet.report_heartbeat)"
    MANAGE = "manage", "manage: POST /api/jobs (with jobs.manage_conversions; prune kinds: jobs.manage_retention)"


#: Every scope (what a token gets unless it is narrowed).
ALL_SCOPES = tuple(Scope.values)


def hash_token(raw: str) -> str:
    """SHA-256 hex of a raw token (what is stored)."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A bearer token for the JSON API, owned by a staff user.

    Only the SHA-256 of the token is stored; the raw value is returned once by
    :meth:`issue`. ``revoked_at`` set means the token no longer authenticates.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    #: :class:`Scope` values this token may use.
    scopes = models.JSONField(default=list)
    #: After this instant the token no longer authenticates (``None``: never expires).
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @classmethod
    def issue(cls, user, name: str = "", *, scopes=ALL_SCOPES, expires_at=None) -> tuple[ApiToken, str]:
        """Create a token for ``user``; returns ``(token, raw_value)``. The raw value is not stored.

        Args:
            scopes: :class:`Scope` values (default: all; the user's permissions still apply).
            expires_at: an aware datetime after which the token stops working, or ``None``.

        Raises:
            ValueError: an unknown scope, or no scope.
        """
        unknown = set(scopes) - set(ALL_SCOPES)
        if unknown or not scopes:
            raise ValueError(f"scopes must be some of {', '.join(ALL_SCOPES)}; got {sorted(scopes)}")
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, key_hash=hash_token(raw), prefix=raw[:12],
                                   scopes=[s for s in ALL_SCOPES if s in scopes], expires_at=expires_at)
        return token, raw

    def allows(self, scope: str) -> bool:
        """Whether this token carries ``scope``."""
        return scope in self.scopes

    @classmethod
    def authenticate_token(cls, raw: str) -> ApiToken | None:
        """The active, unexpired token for ``raw`` whose user is active, or ``None``. Updates ``last_used_at``."""
        token = cls.objects.active().select_related("user").filter(key_hash=hash_token(raw)).first()
        now = timezone.now()
        if token is None or not token.user.is_active or (token.expires_at is not None and token.expires_at <= now):
            return None
        token.last_used_at = now
        cls.objects.filter(pk=token.pk).update(last_used_at=token.last_used_at)
        return token

    @classmethod
    def authenticate(cls, raw: str):
        """The active token's user for ``raw``, or ``None`` (:meth:`authenticate_token`'s user)."""
        token = cls.authenticate_token(raw)
        return token.user if token is not None else None

    def revoke(self) -> None:
        """Stop this token from authenticating."""
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])


class AuditEntry(models.Model):
    """One write request (POST, PUT, PATCH, DELETE) by an authenticated user: who, what, when, from where.

    Recorded by :class:`dashboard.middleware.AuditLogMiddleware` after the
    answer, whatever its status (refusals included); browsed by superusers in
    the admin. Heartbeats are not recorded (each outside process sends one
    every few seconds; the fleet registry keeps their last state).
    """

    at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    #: The username at the time (kept if the user is deleted).
    username = models.CharField(max_length=150)
    #: ``session`` or ``token``.
    via = models.CharField(max_length=8)
    #: The token's prefix (``dfa_…``) when ``via`` is ``token``.
    token_prefix = models.CharField(max_length=12, blank=True)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=2048)
    #: The URL name of the route (``jobs:launch``, ``api:jobs``, ...).
    action = models.CharField(max_length=100, blank=True)
    status = models.PositiveSmallIntegerField()
    remote_addr = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username} {self.method} {self.path} → {self.status}"
