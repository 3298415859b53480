"""``dashboard.accounts.backends.ModelBackend``: Django's permissions, read in one query instead of two.

The backend must grant exactly what Django's ``ModelBackend`` grants (direct and group permissions, none
for an inactive user, every one for a superuser) and answer a page's permission checks with one query.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import backends as django_backends
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.accounts.backends import ModelBackend

pytestmark = pytest.mark.django_db

CONVERT, RETAIN, DISMISS = "jobs.manage_conversions", "jobs.manage_retention", "fleet.dismiss_process"


def _perm(dotted: str) -> Permission:
    app_label, codename = dotted.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def _fresh(user):
    """The user read again (no ``_perm_cache``), as each request reads it."""
    return get_user_model().objects.get(pk=user.pk)


@pytest.fixture
def users():
    """A user with one direct and one group permission, an inactive twin, a superuser and a user with none."""
    model = get_user_model()
    group = Group.objects.create(name="retention")
    group.permissions.add(_perm(RETAIN))
    direct = model.objects.create_user("direct", password="pw-123456789")
    direct.user_permissions.add(_perm(CONVERT))
    direct.groups.add(group)
    inactive = model.objects.create_user("inactive", password="pw-123456789", is_active=False)
    inactive.user_permissions.add(_perm(CONVERT))
    return {"direct": direct, "inactive": inactive, "nobody": model.objects.create_user("nobody"),
            "super": model.objects.create_superuser("root", password="pw-123456789")}


def test_the_settings_use_it_in_place_of_djangos():
    from django.conf import settings

    assert "dashboard.accounts.backends.ModelBackend" in settings.AUTHENTICATION_BACKENDS
    assert "django.contrib.auth.backends.ModelBackend" not in settings.AUTHENTICATION_BACKENDS


@pytest.mark.parametrize("who", ["direct", "inactive", "nobody", "super"])
def test_it_grants_exactly_what_djangos_backend_grants(users, who):
    ours = ModelBackend().get_all_permissions(_fresh(users[who]))
    django = django_backends.ModelBackend().get_all_permissions(_fresh(users[who]))
    assert ours == django
    expected = {"direct": {CONVERT, RETAIN}, "inactive": set(), "nobody": set()}
    if who in expected:
        assert ours == expected[who]
    else:
        assert {CONVERT, RETAIN, DISMISS} <= ours and len(ours) == Permission.objects.count()


def test_a_group_permission_alone_is_held(users):
    users["direct"].user_permissions.clear()
    assert ModelBackend().get_all_permissions(_fresh(users["direct"])) == {RETAIN}


def test_per_object_permissions_are_none(users):
    assert ModelBackend().get_all_permissions(_fresh(users["direct"]), obj=object()) == set()


def test_a_requests_checks_cost_one_query(users):
    user = _fresh(users["direct"])
    with CaptureQueriesContext(connection) as queries:
        assert user.has_perm(CONVERT) and user.has_perm(RETAIN) and not user.has_perm(DISMISS)
    assert len(queries.captured_queries) == 1, [q["sql"] for q in queries.captured_queries]


def test_the_compiled_query_answers_each_user_with_their_own_permissions(users):
    ModelBackend._compiled.clear()
    answers = {who: ModelBackend().get_all_permissions(_fresh(users[who])) for who in ("direct", "nobody")}
    assert answers == {"direct": {CONVERT, RETAIN}, "nobody": set()}
    sql, count = ModelBackend._compiled["default"]
    assert count == 2 and "-987654321" not in sql  # the placeholder id is a parameter, not text in the SQL
    other = get_user_model().objects.create_user("other")
    other.user_permissions.add(_perm(DISMISS))
    with CaptureQueriesContext(connection) as queries:
        assert ModelBackend().get_all_permissions(_fresh(other)) == {DISMISS}
    assert [q["sql"] for q in queries.captured_queries][-1].startswith("SELECT")
    assert len(queries.captured_queries) == 2  # the user's row, then its permissions


def test_sql_compiled_with_other_parameters_is_not_reused(users, monkeypatch):
    monkeypatch.setitem(ModelBackend._compiled, "default", None)  # what a compile with extra parameters leaves
    assert ModelBackend().get_all_permissions(_fresh(users["direct"])) == {CONVERT, RETAIN}
    assert ModelBackend().get_all_permissions(_fresh(users["nobody"])) == set()


def test_postgres_compiles_the_query_with_the_placeholder_as_its_only_parameters():
    from django.db.backends.postgresql.base import DatabaseWrapper

    from dashboard.accounts import backends

    wrapper = DatabaseWrapper({**connection.settings_dict, "ENGINE": "django.db.backends.postgresql", "NAME": "x"},
                              alias="compile-only")
    sql, params = backends._held_query(backends._PLACEHOLDER_PK).query.get_compiler(connection=wrapper).as_sql()
    assert params == (backends._PLACEHOLDER_PK,) * 2 and sql.count("%s") == 2
