"""The templates' ``perms`` with the user's permissions read in one query.

Django's ``ModelBackend`` reads a user's permissions with two ORM queries
(the user's own, then its groups') the first time ``has_perm`` is asked in a
request, about 0.7 ms on the thread page, whose action buttons ask. Here the
same two sets are read in one plain SQL query (table and column names from
the models' metadata) and stored where ``ModelBackend`` keeps them for the
request (``user._perm_cache``), so ``has_perm`` and everything it checks
(active user, superuser, other backends) stay Django's: only the read is
different. Superusers, inactive and anonymous users are left to Django.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.context_processors import PermWrapper
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import DEFAULT_DB_ALIAS, connections, router

__all__ = ["TemplatePerms", "permissions_sql", "prefill_permissions"]

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def permissions_sql(connection: Any) -> str:
    """``SELECT app_label, codename`` of the permissions a user holds directly or through a group
    (two ``%s``: the user's primary key twice), as ``ModelBackend`` reads them, for ``connection``'s quoting."""
    q = connection.ops.quote_name
    up = get_user_model()._meta.get_field("user_permissions")  # user -> permission
    ug = get_user_model()._meta.get_field("groups")  # user -> group
    gp = Group._meta.get_field("permissions")  # group -> permission
    app_label = q(ContentType._meta.get_field("app_label").column)
    codename = q(Permission._meta.get_field("codename").column)
    ct_id = q(Permission._meta.get_field("content_type").column)
    return (
        f"SELECT ct.{app_label}, p.{codename} FROM {q(Permission._meta.db_table)} p "
        f"JOIN {q(ContentType._meta.db_table)} ct ON ct.{q(ContentType._meta.pk.column)} = p.{ct_id} "
        f"WHERE p.{q(Permission._meta.pk.column)} IN ("
        f"SELECT up.{q(up.m2m_reverse_name())} FROM {q(up.m2m_db_table())} up "
        f"WHERE up.{q(up.m2m_column_name())} = %s "
        f"UNION SELECT gp.{q(gp.m2m_reverse_name())} FROM {q(gp.m2m_db_table())} gp "
        f"JOIN {q(ug.m2m_db_table())} ug ON ug.{q(ug.m2m_reverse_name())} = gp.{q(gp.m2m_column_name())} "
        f"WHERE ug.{q(ug.m2m_column_name())} = %s)"
    )


def prefill_permissions(user: Any) -> bool:
    """Store ``user``'s permissions where ``ModelBackend.get_all_permissions`` looks first (one query).

    Only for an active, authenticated, non-superuser user whose permissions this request has not read
    yet, and only while ``ModelBackend`` is configured; anything else is left to Django.

    Returns:
        True when the permissions were read here.
    """
    if (MODEL_BACKEND not in settings.AUTHENTICATION_BACKENDS or user is None
            or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False)
            or getattr(user, "is_superuser", False) or hasattr(user, "_perm_cache")):
        return False
    connection = connections[router.db_for_read(Permission) or DEFAULT_DB_ALIAS]
    with connection.cursor() as cur:
        cur.execute(permissions_sql(connection), [user.pk, user.pk])
        user._perm_cache = {f"{app_label}.{codename}" for app_label, codename in cur.fetchall()}
    return True


class TemplatePerms(PermWrapper):
    """Django's ``perms`` template variable, reading the permissions in one query on first use."""

    def _prefill(self) -> None:
        if not getattr(self, "_filled", False):
            self._filled = True
            prefill_permissions(self.user)

    def __getitem__(self, app_label: str) -> Any:
        self._prefill()
        return super().__getitem__(app_label)

    def __contains__(self, perm_name: object) -> bool:
        self._prefill()
        return super().__contains__(perm_name)
