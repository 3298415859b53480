"""One way each for fragment choice, method checks and API CSRF (issue 17 item 5).

* Fragment choice: only :mod:`dashboard.fragments` reads ``request.htmx``.
* API CSRF: Django's ``CsrfViewMiddleware`` with the two rules of :mod:`dashboard.middleware`
  (a bearer token is exempt, an anonymous call is a 401); no view builds its own CSRF check or is exempt.
* Method checks: every API route answers a method it does not take with the same JSON 405.

The URL-conf walk reuses the route list of ``tests/dashboard/accounts/test_api_auth.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.test import Client

from tests.dashboard.accounts.test_api_auth import API, bearer, issue

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboard"


def _modules() -> list[Path]:
    return sorted(p for p in DASHBOARD.rglob("*.py") if "migrations" not in p.parts)


def _uses(path: Path) -> tuple[set[str], set[str]]:
    """(attribute names read or written, names imported) in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    attrs |= {n.args[1].value for n in ast.walk(tree)  # getattr(request, "htmx", ...) reads it too
              if isinstance(n, ast.Call) and getattr(n.func, "id", None) in ("getattr", "hasattr")
              and len(n.args) > 1 and isinstance(n.args[1], ast.Constant)}
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    return attrs, imported


def test_the_walk_sees_the_web_layer():
    names = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert {"dashboard/fragments.py", "dashboard/middleware.py", "dashboard/jobs/api.py",
            "dashboard/fleet/api.py", "dashboard/threads/views.py"} <= names


def test_only_the_fragments_module_reads_request_htmx():
    readers = [p.relative_to(ROOT).as_posix() for p in _modules() if "htmx" in _uses(p)[0]]
    assert readers == ["dashboard/fragments.py"]


def test_no_view_has_its_own_csrf_check_or_exemption():
    offenders = {}
    for path in _modules():
        attrs, imported = _uses(path)
        found = ({"csrf_exempt", "CsrfViewMiddleware"} & imported) | ({"_dont_enforce_csrf_checks"} & attrs)
        if path == DASHBOARD / "middleware.py":
            found -= {"_dont_enforce_csrf_checks"}  # BearerTokenCsrfMiddleware: the one exemption
        if found:
            offenders[path.relative_to(ROOT).as_posix()] = sorted(found)
    assert offenders == {}


@pytest.fixture
def served(sqlite_fixture_db, runtime_for):
    return runtime_for(sqlite_fixture_db, "delta")


def _json_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"detail", "hint", "code"} and body["code"] == code
    return body


@pytest.mark.django_db
@pytest.mark.parametrize("name,url", API)
def test_every_api_session_post_without_csrf_token_is_the_same_json_403(served, staff_user, name, url):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    body = _json_error(client.post(url, "{}", content_type="application/json"), 403, "csrf_failed")
    assert body["detail"].startswith("CSRF verification failed: CSRF "), name
    assert body["hint"].startswith("Send Authorization: Bearer <token>"), name


@pytest.mark.django_db
@pytest.mark.parametrize("name,url", API)
def test_every_api_route_answers_an_unsupported_method_with_the_same_json_405(served, staff_user, name, url):
    client = Client(enforce_csrf_checks=True)  # a token needs no CSRF token, whatever the method
    response = client.generic("PATCH", url, **bearer(issue()))
    body = _json_error(response, 405, "method_not_allowed")
    assert response["Allow"], name
    assert body["detail"] == f"Method PATCH is not allowed at {url.split('?')[0]}.", name
    assert body["hint"], name  # the route's own advice (e.g. "The thread API is read-only; use GET.")


@pytest.mark.django_db
@pytest.mark.parametrize("name,url", API)
def test_every_anonymous_api_post_is_a_401_never_a_csrf_failure(served, name, url):
    body = _json_error(Client(enforce_csrf_checks=True).post(url), 401, "authentication_required")
    assert body["hint"].startswith("Log in as a staff user"), name


def test_favicon_ico_is_the_static_icon_for_anyone(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("dashboard/favicon.svg")
    assert client.head("/favicon.ico").status_code == 301
    assert client.post("/favicon.ico").status_code == 405
