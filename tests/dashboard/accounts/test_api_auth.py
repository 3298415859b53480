"""Access control on every URL, and API bearer tokens from ``create_api_token``.

Personas: anonymous, ``outsider`` (logged in, not staff), ``staff``. Every
route in the URL conf except login/logout and the data-free ``/healthz`` needs staff: the API answers 401
JSON (anonymous, bad token) or 403 JSON (not staff); pages redirect to the
login page.
"""

from __future__ import annotations

import io
import re
from urllib.parse import urlsplit

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from dashboard.accounts.models import ApiToken, hash_token

pytestmark = pytest.mark.django_db

# healthz: frozen mode only (tests/hardening/test_every_url.py); favicon: a redirect to the static icon
PUBLIC = {"login", "logout", "healthz", "metrics", "favicon"}
# metrics: its own token, no session (tests/dashboard/test_metrics.py)
SAMPLE_THREAD = "delta-f10-1t"
SAMPLE_ARGS = {"path": SAMPLE_THREAD, "str": "sample", "slug": "sample", "int": "1",
               "uuid": "00000000-0000-0000-0000-000000000001"}
THREAD_ROUTES = {"threads:list", "threads:detail", "thread-history", "thread-detail-by-query",
                 "thread-history-by-query", "api:threads", "api:state", "api:history", "api:namespaces"}


def _concrete(route: str) -> str:
    return re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLE_ARGS[m.group(1) or "str"], route)


def _routes(patterns=None, prefix: str = "", namespace: str = "") -> list[tuple[str, str]]:
    """``(qualified name, concrete URL)`` for every pattern of the URL conf (sample values for parameters)."""
    out: list[tuple[str, str]] = []
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        route = str(pattern.pattern)
        if route == "admin/":
            continue  # Django's admin (superusers): tests/dashboard/test_admin.py
        if isinstance(pattern, URLResolver):
            ns = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            out.extend(_routes(pattern.url_patterns, prefix + route, ns))
        elif isinstance(pattern, URLPattern):
            url = "/" + _concrete(prefix + route)
            if pattern.name and pattern.name.endswith("-by-query"):
                url += f"?thread_id={SAMPLE_THREAD}"
            out.append((f"{namespace}{pattern.name}", url))
    return out


ROUTES = _routes()
PROTECTED = [(name, url) for name, url in ROUTES if name not in PUBLIC]
API = [(name, url) for name, url in PROTECTED if url.startswith("/api/")]
PAGES = [(name, url) for name, url in PROTECTED if not url.startswith("/api/")]


def call(client, url: str, **extra):
    """GET ``url``; a route that does not allow GET is called with the first method it allows."""
    response = client.get(url, **extra)
    if response.status_code == 405:
        allowed = [m.strip().lower() for m in response.get("Allow", "").split(",") if m.strip()]
        method = next((m for m in allowed if m in {"post", "put", "patch", "delete"}), None)
        if method:
            response = getattr(client, method)(url, **extra)
    return response


def test_url_conf_is_fully_covered():
    names = [name for name, _ in ROUTES]
    assert {"login", "logout", "home"} | THREAD_ROUTES <= set(names)
    assert API and PAGES
    assert len(names) == len(set(names)), "every route has its own name"
    assert all(not name.endswith(":None") and name != "None" for name in names), "every route is named"


@pytest.fixture
def served(sqlite_fixture_db, runtime_for):
    return runtime_for(sqlite_fixture_db, "delta")


@pytest.mark.parametrize(("name", "url"), API)
def test_api_anonymous_is_401_json(served, client, name, url):
    response = call(client, url)
    assert response.status_code == 401
    body = response.json()
    assert (body["code"], body["detail"]) == ("authentication_required", "Authentication required.")
    assert "Bearer" in body["hint"]


@pytest.mark.parametrize(("name", "url"), API)
def test_api_outsider_is_403_json(served, client, outsider_user, name, url):
    client.force_login(outsider_user)
    response = call(client, url)
    assert response.status_code == 403
    body = response.json()
    assert set(body) == {"detail", "hint", "code"}
    assert body["code"] == "staff_required"


@pytest.mark.parametrize(("name", "url"), [(n, u) for n, u in API if n in THREAD_ROUTES])
def test_api_staff_is_200(served, staff_client, name, url):
    assert staff_client.get(url).status_code == 200


def _assert_lands_on_login(client, url: str) -> None:
    first = call(client, url)
    assert first.status_code == 302, f"{url} answered {first.status_code} without a redirect"
    response = client.get(first["Location"], follow=True)
    assert response.status_code == 200
    final = urlsplit(response.redirect_chain[-1][0]) if response.redirect_chain else urlsplit(first["Location"])
    assert final.path == reverse("login")
    html = response.content.decode("utf-8")
    assert "Log in" in html
    # Nothing of the dashboard leaks onto the login page (the thread URL only survives as ``next``).
    for marker in ('id="messages"', 'id="thread-table"', 'class="grid history"'):
        assert marker not in html


@pytest.mark.parametrize(("name", "url"), PAGES)
def test_pages_redirect_anonymous_to_login(served, client, name, url):
    _assert_lands_on_login(client, url)


@pytest.mark.parametrize(("name", "url"), [(n, u) for n, u in PAGES if n != "home"])
def test_pages_redirect_anonymous_with_next(served, client, name, url):
    response = call(client, url)
    target = urlsplit(response["Location"])
    assert target.path == reverse("login")
    assert "next=" in target.query


@pytest.mark.parametrize(("name", "url"), PAGES)
def test_pages_redirect_outsider_to_login(served, client, outsider_user, name, url):
    client.force_login(outsider_user)
    _assert_lands_on_login(client, url)


@pytest.mark.parametrize(("name", "url"), [(n, u) for n, u in PAGES if n in THREAD_ROUTES | {"home"}])
def test_pages_serve_staff(served, staff_client, name, url):
    response = staff_client.get(url, follow=True)
    assert response.status_code == 200
    assert urlsplit(response.wsgi_request.path).path != reverse("login")


@pytest.mark.parametrize(("name", "url"), PROTECTED)
def test_staff_is_let_through_every_route(served, staff_client, name, url):
    """Staff is never refused (sample ids may be unknown: 404/400 are fine, 401/403/login are not)."""
    response = staff_client.get(url)
    if response.status_code == 405:
        return  # a write route; its refusal of non-staff is covered above
    assert response.status_code not in (401, 403)
    if response.status_code == 302:
        assert urlsplit(response["Location"]).path != reverse("login")
    assert response.status_code < 500


def test_login_page_is_public_and_logs_staff_in(served, client, staff_user):
    assert client.get(reverse("login")).status_code == 200
    response = client.post(reverse("login"), {"username": "staff", "password": "staff-pass"})
    assert response.status_code == 302
    assert client.get("/threads/").status_code == 200


def test_logout_is_post_only_and_ends_the_session(served, staff_client):
    assert staff_client.get(reverse("logout")).status_code == 405
    assert staff_client.post(reverse("logout")).status_code == 302
    assert staff_client.get("/threads/").status_code == 302
    assert staff_client.get("/api/threads").status_code == 401


# -- tokens ---------------------------------------------------------------------

def issue(username: str = "staff", *extra: str) -> str:
    out = io.StringIO()
    call_command("create_api_token", username, *extra, stdout=out)
    raw = out.getvalue().strip()
    assert raw and "\n" not in raw
    return raw


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


@pytest.mark.parametrize(("name", "url"), API)
def test_bearer_token_opens_every_api_route(served, staff_user, name, url):
    from django.contrib.auth.models import Permission

    # Writes need their permission besides staff (tests/dashboard/accounts/test_token_scopes.py); grant them here.
    staff_user.user_permissions.add(*Permission.objects.filter(codename__in=["report_heartbeat",
                                                                             "manage_conversions"]))
    raw = issue()
    response = call(Client(), url, **bearer(raw))
    if name in THREAD_ROUTES:
        assert response.status_code == 200
    else:  # sample ids may be unknown or the payload empty; the token must not be refused
        assert response.status_code not in (401, 403)
        assert response.status_code < 500


def test_token_is_stored_hashed_and_usage_recorded(served, staff_user):
    raw = issue("staff", "--name", "ci")
    token = ApiToken.objects.get()
    assert token.key_hash == hash_token(raw) != raw
    assert token.name == "ci"
    assert token.user == staff_user
    for field in ApiToken._meta.concrete_fields:
        assert raw not in str(getattr(token, field.attname)), field.name
    with connection.cursor() as cursor:  # nothing in any table holds the raw value
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                assert not any(raw in str(value) for value in row), table
    assert token.last_used_at is None
    assert Client().get("/api/threads", **bearer(raw)).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_each_token_is_new(served, staff_user):
    assert issue() != issue()
    assert ApiToken.objects.count() == 2


@pytest.mark.parametrize("header", ["Bearer dfa_wrong", "Bearer " + "x" * 500, "bearer dfa_wrong"])
def test_wrong_token_is_401(served, staff_user, header):
    issue()
    response = Client().get("/api/threads", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid or revoked API token."
    assert response.json()["code"] == "invalid_token"


@pytest.mark.parametrize("header", ["Bearer", "Bearer   ", "Basic c3RhZmY6c3RhZmYtcGFzcw==", "Token abc"])
def test_malformed_authorization_is_401(served, staff_user, header):
    response = Client().get("/api/threads", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401


def test_revoked_token_is_401(served, staff_user):
    raw = issue()
    client = Client()
    assert client.get("/api/threads", **bearer(raw)).status_code == 200
    ApiToken.objects.get().revoke()
    response = client.get("/api/threads", **bearer(raw))
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid or revoked API token."


def test_token_of_demoted_user_is_403_and_of_inactive_user_401(served, staff_user):
    raw = issue()
    staff_user.is_staff = False
    staff_user.save()
    assert Client().get("/api/threads", **bearer(raw)).status_code == 403
    staff_user.is_staff, staff_user.is_active = True, False
    staff_user.save()
    assert Client().get("/api/threads", **bearer(raw)).status_code == 401


def test_bad_token_is_not_rescued_by_a_session(served, staff_client):
    response = staff_client.get("/api/threads", HTTP_AUTHORIZATION="Bearer dfa_wrong")
    assert response.status_code == 401


def test_token_does_not_open_pages(served, staff_user):
    raw = issue()
    assert Client().get("/threads/", **bearer(raw)).status_code == 302


def test_create_api_token_refuses_unknown_user(db):
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        call_command("create_api_token", "ghost", stdout=io.StringIO())
    assert ApiToken.objects.count() == 0


def test_create_api_token_refuses_non_staff_user(outsider_user):
    with pytest.raises(CommandError, match="not staff"):
        call_command("create_api_token", "outsider", stdout=io.StringIO())
    assert ApiToken.objects.count() == 0


@pytest.mark.parametrize(("method", "url", "allow"), [
    ("post", "/api/threads", "GET"),
    ("delete", f"/api/threads/{SAMPLE_THREAD}/state", "GET"),
    ("put", "/api/audit", "GET"),
    ("delete", "/api/jobs/1", "GET"),
])
def test_a_token_request_with_the_wrong_method_is_a_405_not_a_csrf_failure(served, staff_user, method, url, allow):
    """A bearer token is no ambient credential: the CSRF check does not apply, the method check does."""
    raw = issue()
    client = Client(enforce_csrf_checks=True)
    response = getattr(client, method)(url, **bearer(raw))
    assert response.status_code == 405, response.content
    assert response.json()["code"] == "method_not_allowed" and response["Allow"] == allow


def test_a_session_post_still_needs_its_csrf_token(served, staff_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    refused = client.post("/api/processes/heartbeat", "{}", content_type="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "csrf_failed"
    # An empty or non-bearer Authorization header is no token: still the session's CSRF check.
    for header in ("Bearer ", "Basic c3RhZmY6cGFzcw=="):
        refused = client.post("/api/processes/heartbeat", "{}", content_type="application/json",
                              HTTP_AUTHORIZATION=header)
        assert refused.status_code == 403 and refused.json()["code"] == "csrf_failed", header
