"""The templates' ``perms`` read a user's permissions in one query and answer exactly what Django answers."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.accounts.permcache import TemplatePerms, prefill_permissions

CODES = ("jobs.manage_conversions", "jobs.manage_retention", "jobs.view_conversionjob", "auth.add_user")


def _perm(code: str) -> Permission:
    app_label, codename = code.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def _users() -> dict[str, object]:
    User = get_user_model()
    ops = Group.objects.create(name="ops")
    ops.permissions.add(_perm("jobs.manage_conversions"), _perm("auth.add_user"))
    other = Group.objects.create(name="other")
    other.permissions.add(_perm("jobs.manage_retention"))
    users = {
        "none": User.objects.create_user("none", is_staff=True),
        "own": User.objects.create_user("own", is_staff=True),
        "group": User.objects.create_user("group", is_staff=True),
        "both": User.objects.create_user("both", is_staff=True),
        "inactive": User.objects.create_user("inactive", is_staff=True, is_active=False),
        "super": User.objects.create_superuser("super"),
    }
    users["own"].user_permissions.add(_perm("jobs.manage_retention"))
    users["group"].groups.add(ops)
    users["both"].groups.add(ops, other)
    users["both"].user_permissions.add(_perm("jobs.manage_retention"), _perm("jobs.view_conversionjob"))
    users["inactive"].groups.add(ops)
    return users


@pytest.mark.django_db
def test_the_one_query_reads_what_model_backend_reads():
    User = get_user_model()
    for name, user in _users().items():
        fresh, filled = User.objects.get(pk=user.pk), User.objects.get(pk=user.pk)
        assert prefill_permissions(filled) is (name not in ("inactive", "super"))
        assert filled.get_all_permissions() == ModelBackend().get_all_permissions(fresh) == fresh.get_all_permissions()
        for code in CODES:
            assert filled.has_perm(code) == User.objects.get(pk=user.pk).has_perm(code), (name, code)
        assert prefill_permissions(filled) is False  # read once per request
    assert prefill_permissions(AnonymousUser()) is False


@pytest.mark.django_db
def test_template_perms_answer_as_djangos_with_one_query():
    from django.contrib.auth.context_processors import PermWrapper

    User = get_user_model()
    user = User.objects.get(pk=_users()["both"].pk)
    with CaptureQueriesContext(connection) as queries:
        perms = TemplatePerms(user)
        got = [bool(perms["jobs"][c.split(".")[1]]) if c.startswith("jobs.") else c in perms for c in CODES]
        assert bool(perms["jobs"]) and "jobs" in perms
    assert len(queries) == 1
    django = PermWrapper(User.objects.get(pk=user.pk))
    assert got == [bool(django["jobs"][c.split(".")[1]]) if c.startswith("jobs.") else c in django for c in CODES]
    assert got == [True, True, True, True]


@pytest.mark.django_db
def test_the_thread_page_actions_follow_group_permissions(sqlite_fixture_db, runtime_for, client):
    runtime_for(sqlite_fixture_db, "delta", 10)
    users = _users()
    client.force_login(users["group"])  # manage_conversions through ops, no manage_retention
    html = client.get("/threads/delta-f3-40t/").content.decode()
    assert 'id="convert-to-full"' in html and 'id="prune-history"' not in html
    client.force_login(users["none"])
    html = client.get("/threads/delta-f3-40t/").content.decode()
    assert 'id="convert-to-full"' not in html and "needs the permission jobs.manage_conversions" in html
