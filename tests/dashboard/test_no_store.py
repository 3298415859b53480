"""Private answers are not cached: ``Cache-Control: no-store`` on every authenticated response.

Personas: ``staff`` (session), a bearer token of ``staff``, anonymous.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils.cache import get_max_age

from dashboard.accounts.models import ApiToken

pytestmark = pytest.mark.django_db

PAGES = ["/threads/", "/threads/delta-f10-1t/", "/history/delta-f10-1t/", "/jobs/", "/audit/",
         "/api/threads", "/api/threads/delta-f10-1t/state", "/api/jobs", "/threads/no-such-thread/"]


@pytest.fixture
def served(sqlite_fixture_db, runtime_for):
    return runtime_for(sqlite_fixture_db, "delta")


def _no_store(response) -> bool:
    parts = {p.strip() for p in response.get("Cache-Control", "").split(",")}
    return "no-store" in parts and "private" in parts and get_max_age(response) == 0


@pytest.mark.parametrize("url", PAGES)
def test_session_answers_are_no_store(served, staff_client, url):
    response = staff_client.get(url)
    assert response.status_code in (200, 404), response.status_code
    assert _no_store(response), response.get("Cache-Control")


@pytest.mark.parametrize("url", [u for u in PAGES if u.startswith("/api/")])
def test_token_answers_are_no_store(served, staff_user, url):
    _, raw = ApiToken.issue(staff_user)
    response = Client().get(url, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200
    assert _no_store(response), response.get("Cache-Control")


def test_static_files_stay_cacheable(served, staff_client):
    response = staff_client.get("/static/dashboard/app.css")
    assert response.status_code == 200 and "no-store" not in response.get("Cache-Control", "")
