"""Authentication backends: API bearer tokens (counted like login failures), and passwords and
permissions as Django's ``ModelBackend`` does them, with a user's permissions read in one query
whose SQL the ORM compiles once per database."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import backends
from django.contrib.auth.models import Permission
from django.db import connections, router
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from dashboard.accounts.models import ApiToken

__all__ = ["ApiTokenBackend", "ModelBackend"]


#: A user id no row has (ids are positive): the placeholder the held-permissions SQL is compiled with.
_PLACEHOLDER_PK = -987_654_321


def _held_query(user_pk: int) -> QuerySet:
    """``(app_label, codename)`` of every permission the user ``user_pk`` holds directly or through a group."""
    return Permission.objects.filter(Q(user=user_pk) | Q(group__user=user_pk)).values_list(
        "content_type__app_label", "codename").order_by()


class ModelBackend(backends.ModelBackend):
    """Django's ``ModelBackend`` (passwords, ``is_active``, user and group permissions), lighter per request.

    ``has_perm`` reads the set of every permission the user holds. Django's backend builds that set from
    two queries (the user's own permissions, then its groups') and keeps it on the user object, which a
    request reads once. Here one query reads both: a permission is held if the user holds it directly *or*
    through a group. Building that query through the ORM costs more than running it (a visible share of a
    thread page), so its SQL is compiled once per database alias, with a placeholder
    user id, and run again with each user's id; the ORM still writes the SQL (the dialect, the table and
    column names of the installed user model). If the compiled parameters are anything but the placeholder,
    the queryset runs as it is. A page that checks permissions pays one short query. The set is kept under
    this class's own attribute (:data:`CACHE_ATTRIBUTE`), not Django's private ``_perm_cache``. What a user
    may do is unchanged: an inactive or anonymous user has no permission, a superuser every one, and
    per-object permissions are not supported (Django's backend supports none either).
    ``get_user_permissions`` and ``get_group_permissions`` are Django's.
    """

    #: Where the permission set of a user object is kept for the object's life (one request).
    CACHE_ATTRIBUTE = "_dashboard_permissions"

    #: ``{database alias: (SQL, number of user-id parameters) or None}``: the held-permissions query as compiled
    #: (``None``: its parameters were not only the placeholder, so it is never reused).
    _compiled: dict[str, tuple[str, int] | None] = {}

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        """``{"app_label.codename", ...}`` the user holds directly or through a group; read once per user object.

        Returns:
            The set (empty for an inactive or anonymous user, or when ``obj`` is given).
        """
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        cached = getattr(user_obj, self.CACHE_ATTRIBUTE, None)
        if cached is None:
            rows = (Permission.objects.values_list("content_type__app_label", "codename").order_by()
                    if user_obj.is_superuser else self._held_rows(user_obj.pk))
            cached = {f"{app_label}.{codename}" for app_label, codename in rows}
            setattr(user_obj, self.CACHE_ATTRIBUTE, cached)
        return cached

    def _held_rows(self, user_pk: int) -> Any:
        """``(app_label, codename)`` rows of :func:`_held_query`, through its SQL compiled once per alias."""
        alias = router.db_for_read(Permission)  # the queryset's own database (building it is the cost saved)
        if alias not in self._compiled:
            sql, params = _held_query(_PLACEHOLDER_PK).query.get_compiler(using=alias).as_sql()
            reusable = bool(params) and all(p == _PLACEHOLDER_PK for p in params)
            self._compiled[alias] = (sql, len(params)) if reusable else None
        compiled = self._compiled[alias]
        if compiled is None:
            return _held_query(user_pk)
        sql, count = compiled
        with connections[alias].cursor() as cursor:
            cursor.execute(sql, [user_pk] * count)
            return cursor.fetchall()


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
