"""Access control over the whole URL conf: every route is walked from ``get_resolver()``, none is listed by hand.

* Anonymous: every ``/api/`` route answers 401 JSON, every page ends on the
  login page; the only exceptions are the login page itself and ``/healthz``.
* Logged in but not staff: ``/api/`` answers 403 JSON, pages end on the login page.
* Staff without ``jobs.manage_conversions`` or ``fleet.report_heartbeat``: every route that changes
  something (POST) answers 403, except logging out.
* Staff with the permission, through a browser session: every POST without
  a CSRF token answers 403.

Routes are tried with GET; a route that answers 405 to GET is tried with POST.
Parameters get sample values (``<int:…>`` 1, other converters a thread id).
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

# /metrics: its own token (dashboard/test_metrics.py); /favicon.ico: browsers ask for it before any login.
PUBLIC = {"/accounts/login/", "/healthz", "/metrics", "/favicon.ico"}
#: POST routes that staff may use without a permission (heartbeats need fleet.report_heartbeat).
POST_WITHOUT_PERMISSION = {"/accounts/logout/",
                           "/accounts/tokens/create", "/accounts/tokens/revoke"}  # own API tokens: any staff
SAMPLES = {"int": "1", "path": "delta-f10-9t", "str": "x", "slug": "x", "uuid": "00000000-0000-0000-0000-000000000000"}


def _walk(patterns, prefix: str = "") -> list[str]:
    routes = []
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if route == "admin/":
            continue  # Django's admin (superusers only, its own login): tests/dashboard/test_admin.py
        if isinstance(entry, URLResolver):
            routes.extend(_walk(entry.url_patterns, route))
        else:
            assert isinstance(entry, URLPattern)
            assert not route.startswith("^"), f"regex route {route!r}: give it a sample here"
            routes.append(route)
    return routes


def every_url() -> list[str]:
    """Every route of the URL conf as a concrete path."""
    def sample(match: re.Match) -> str:
        return SAMPLES[match.group(1) or "str"]

    return sorted({"/" + re.sub(r"<(?:(\w+):)?\w+>", sample, route) for route in _walk(get_resolver().url_patterns)})


URLS = every_url()
PROTECTED = [u for u in URLS if u not in PUBLIC]


def request(client: Client, url: str):
    """GET, or POST when the route does not take GET; returns the response (redirects followed)."""
    response = client.get(url, follow=True)
    if response.status_code == 405:
        response = client.post(url, follow=True)
    return response


def test_the_walk_finds_every_app():
    assert set(PUBLIC) <= set(URLS)
    for expected in ("/threads/", "/threads/delta-f10-9t/", "/api/threads", "/api/threads/delta-f10-9t/state",
                     "/jobs/", "/jobs/launch", "/jobs/1/action", "/api/jobs", "/audit/", "/api/audit",
                     "/api/processes/heartbeat", "/history/delta-f10-9t/", "/thread/"):
        assert expected in URLS, expected
    assert len(URLS) >= 25


def _ends_on_login(response, url: str) -> None:
    assert response.redirect_chain, f"{url} answered {response.status_code} without redirecting to the login page"
    final = response.redirect_chain[-1][0]
    assert final.startswith("/accounts/login/"), (url, response.redirect_chain)
    assert response.status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("url", PROTECTED)
def test_anonymous_is_turned_away(url):
    response = request(Client(), url)
    if url.startswith("/api/"):
        assert response.status_code == 401, (url, response.status_code)
        assert {"detail", "hint"} <= set(response.json())
    else:
        _ends_on_login(response, url)


@pytest.mark.django_db
@pytest.mark.parametrize("url", PROTECTED)
def test_non_staff_is_turned_away(url, outsider_user):
    client = Client()
    client.force_login(outsider_user)
    response = request(client, url)
    if url.startswith("/api/"):
        assert response.status_code == 403, (url, response.status_code)
        assert {"detail", "hint"} <= set(response.json())
    else:
        _ends_on_login(response, url)  # staff_member_required sends non-staff to log in as staff


#: Routes answering both a GET (their confirmation page) and a POST (the action).
GET_AND_POST = {"/api/jobs", "/jobs/backups/purge", "/jobs/backups/revert"}


def _takes_post(client: Client, url: str) -> bool:
    return client.get(url).status_code == 405 or url in GET_AND_POST


@pytest.mark.django_db
def test_staff_without_the_permission_cannot_change_anything(staff_client, sqlite_fixture_db, runtime_for):
    runtime_for(sqlite_fixture_db, "delta")  # the GET probes reach the views
    posts = [u for u in PROTECTED if _takes_post(staff_client, u) and u not in POST_WITHOUT_PERMISSION]
    assert {"/jobs/launch", "/jobs/1/convert", "/jobs/1/action", "/jobs/backups/purge", "/api/jobs"} <= set(posts)
    for url in posts:
        assert staff_client.post(url).status_code == 403, url


@pytest.mark.django_db
def test_every_post_needs_a_csrf_token_with_a_session(django_user_model, sqlite_fixture_db, runtime_for):
    runtime_for(sqlite_fixture_db, "delta")
    manager = django_user_model.objects.create_user("manager", password="manager-pass", is_staff=True)
    manager.user_permissions.add(Permission.objects.get(codename="manage_conversions"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    posts = [u for u in URLS if _takes_post(client, u)]
    assert len(posts) >= 7
    for url in posts:
        assert client.post(url).status_code == 403, url
