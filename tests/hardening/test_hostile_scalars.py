"""Hostile scalars on every route (issue 13, "Reading", item 7): a 400 with a code, never a 500.

The routes come from walking the URL conf (``get_resolver()``), none listed by
hand. Each is sent, with GET (and with POST where it takes POST), as a staff
user holding ``jobs.manage_conversions`` so the request reaches the view:

* a NUL byte in the path parameter (a thread id) and in every query and form
  value the routes read (``thread_id``, ``checkpoint_id``, ``checkpoint_ns``,
  ``before``, ``cursor``, ``q``, ...);
* integers past what the store holds, in ``<int:…>`` path parameters and in
  numeric query parameters;
* a JSON body nested 100,000 deep.

On Postgres, whose text columns cannot hold a NUL and whose integers stop at
64 bits, and on SQLite. Every answer is below 500; the hostile path and query
values answer 400 with a ``code``.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from tests.backends import BACKENDS
from tests.hardening.test_every_url import URLS, _walk  # the walk of the URL conf

NUL = "\x00"
HUGE = "9" * 40  # past any 64-bit integer column
PARAM_NAMES = ("thread_id", "checkpoint_id", "checkpoint_ns", "before", "cursor", "q", "mode", "thread_class",
               "sort", "limit", "status", "kind", "fragment", "page", "job", "since", "until", "actor")
HOSTILE_QUERIES = {
    "nul": {name: f"x{NUL}y" for name in PARAM_NAMES},
    "huge": {name: HUGE for name in PARAM_NAMES},
}
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _routes() -> list[str]:
    """Every route with each path parameter filled with a placeholder ``{}`` (one per route)."""
    from django.urls import get_resolver

    out = set()
    for route in _walk(get_resolver().url_patterns):
        out.add("/" + re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: "{" + (m.group(1) or "str") + "}", route))
    return sorted(out)


ROUTES = _routes()


def _fill(route: str, *, thread_id: str = "delta-f10-9t", integer: str = "1") -> str:
    from urllib.parse import quote

    return (route.replace("{path}", quote(thread_id, safe="")).replace("{str}", quote(thread_id, safe=""))
            .replace("{int}", integer).replace("{slug}", "x"))


@pytest.fixture(params=BACKENDS)
def served(request, runtime_for, django_user_model):
    database = request.getfixturevalue(f"{request.param}_fixture_db")
    runtime_for(database, "delta")
    manager = django_user_model.objects.create_user("manager", password="manager-pass", is_staff=True)
    manager.user_permissions.add(Permission.objects.get(codename="manage_conversions"))
    client = Client()
    client.force_login(manager)
    return client


def _send(client: Client, url: str, *, data=None, body: str | None = None):
    response = client.get(url, data) if body is None else None
    if response is None or response.status_code == 405:
        if body is not None:
            response = client.post(url, body, content_type="application/json")
        else:
            response = client.post(url, data or {})
    return response


def _assert_handled(response, what: str, *, bad_input: bool = True) -> None:
    assert response.status_code < 500, (what, response.status_code, response.content[:300])
    if bad_input and response.status_code == 400 and response.get("Content-Type", "").startswith("application/json"):
        assert response.json().get("code"), (what, response.content[:300])


def test_the_walk_sees_every_parameterized_route():
    assert "/api/threads/{path}/state" in ROUTES and "/jobs/{int}/" in ROUTES and "/history/{path}/" in ROUTES
    assert len(ROUTES) == len(URLS) >= 25  # one placeholder route per concrete route of the walk


@pytest.mark.django_db
def test_a_nul_byte_in_a_path_parameter_is_a_400_with_a_code(served):
    for route in ROUTES:
        if "{path}" not in route and "{str}" not in route:
            continue
        url = _fill(route, thread_id=f"bad{NUL}id")
        response = _send(served, url)
        assert response.status_code == 400, (url, response.status_code, response.content[:300])
        if url.startswith("/api/"):
            assert response.json()["code"] == "invalid_parameters"
            assert "NUL" in response.json()["detail"] and "NUL" in response.json()["hint"]


@pytest.mark.django_db
def test_an_integer_past_the_store_in_a_path_parameter_is_a_400_with_a_code(served):
    for route in ROUTES:
        if "{int}" not in route:
            continue
        url = _fill(route, integer=HUGE)
        response = _send(served, url)
        assert response.status_code == 400, (url, response.status_code, response.content[:300])
        if url.startswith("/api/"):
            assert response.json()["code"] == "invalid_parameters"
            assert "digits" in response.json()["hint"] and "NUL" not in response.json()["hint"]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", list(HOSTILE_QUERIES))
def test_hostile_query_and_form_values_never_answer_500(served, kind):
    for route in ROUTES:
        url = _fill(route)
        response = _send(served, url, data=HOSTILE_QUERIES[kind])
        _assert_handled(response, f"{kind} {url}")
        if kind == "nul":
            assert response.status_code == 400, (url, response.status_code, response.content[:300])


@pytest.mark.django_db
def test_json_nested_100000_deep_never_answers_500(served):
    for route in ROUTES:
        url = _fill(route)
        response = _send(served, url, body=DEEP_JSON)
        _assert_handled(response, f"deep JSON {url}", bad_input=False)
