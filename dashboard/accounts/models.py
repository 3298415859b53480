"""API tokens: stored as SHA-256 hashes, shown once, revocable."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "dfa_"


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

    objects = ApiTokenQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @classmethod
    def issue(cls, user, name: str = "") -> tuple[ApiToken, str]:
        """Create a token for ``user``; returns ``(token, raw_value)``. The raw value is not stored."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, key_hash=hash_token(raw), prefix=raw[:12])
        return token, raw

    @classmethod
    def authenticate_token(cls, raw: str) -> ApiToken | None:
        """The active token for ``raw`` whose user is active, or ``None``. Updates ``last_used_at``."""
        token = cls.objects.active().select_related("user").filter(key_hash=hash_token(raw)).first()
        if token is None or not token.user.is_active:
            return None
        token.last_used_at = timezone.now()
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
