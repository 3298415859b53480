"""Django's own error answers in the project's format: 404, 405, CSRF failures, 400, 403 and 500.

Pages answer the site's layout (navigation, ``HTTP <status> · <code>``, the
detail and "What to do"), or its fragment for an htmx swap; ``/api/``
answers ``{"detail", "hint", "code"}``. Never Django's bare "Not Found",
an empty 405 or "CSRF verification failed ... DEBUG=True".
"""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from dashboard.errors.handlers import CSRF_API_HINT, CSRF_PAGE_HINT
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db


def error_card(response, status: int, code: str) -> tuple[str, str]:
    """``(detail, hint)`` of the one error card of a full page in the site's layout; checks status and code."""
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    doc = parse(response.content)
    assert doc.find_all("nav"), "the page has the site's navigation"
    assert [a.attrs["href"] for a in doc.find_all("nav")[0].find_all("a")][:4] == [
        "/threads/", "/jobs/", "/jobs/backups/", "/audit/"]
    (card,) = doc.find_all("section", cls="error-card")
    assert f"HTTP {status} · {code}" in card.text
    (detail,) = card.find_all("p", cls="detail")
    (hint,) = card.find_all("p", cls="hint")
    assert hint.text.startswith("What to do:")
    return detail.text, hint.text.removeprefix("What to do:").strip()


def api_error(response, status: int, code: str) -> dict:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"detail", "hint", "code"} and body["code"] == code
    return body


# -- 404 ---------------------------------------------------------------------------------------------------------

def test_a_missing_job_answers_the_404_page_naming_it(staff_client):
    detail, hint = error_card(staff_client.get("/jobs/999/"), 404, "job_not_found")
    assert detail == "No job 999."
    assert hint == "Open the job from the Jobs page, which lists every job; check the number in the address."


def test_an_action_on_a_missing_job_answers_the_404_page(manager_client):
    detail, hint = error_card(manager_client.post("/jobs/999/action", {"action": "pause"}), 404, "job_not_found")
    assert detail == "No job 999." and "Jobs page" in hint


@pytest.mark.parametrize("path", ["/jobs/abc/", "/no-such-page/"])
def test_an_unknown_address_answers_the_404_page(staff_client, path):
    detail, hint = error_card(staff_client.get(path), 404, "not_found")
    assert detail == f"No page at {path}."
    assert hint == "Check the address, or go on from the navigation above (Threads, Jobs, Fleet audit)."


def test_an_unknown_address_answers_the_404_page_to_anonymous_too():
    detail, _ = error_card(Client().get("/jobs/abc/"), 404, "not_found")
    assert detail == "No page at /jobs/abc/."


def test_an_htmx_404_answers_the_fragment(staff_client):
    response = staff_client.get("/jobs/999/progress", headers={"HX-Request": "true"})
    assert response.status_code == 404
    html = response.content.decode()
    assert "<html" not in html and "No job 999." in html and "What to do:" in html


def test_an_unknown_api_route_keeps_its_json_404(staff_client):
    body = api_error(staff_client.get("/api/jobs/abc"), 404, "not_found")
    assert body["detail"] == "No API route at /api/jobs/abc."
    assert body["hint"] == "See docs/api.md for the routes."


# -- 405 ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["delete", "post", "put", "patch"])
def test_a_wrong_method_on_the_job_api_answers_json_405(staff_client, method):
    response = getattr(staff_client, method)("/api/jobs/1")
    body = api_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET"
    assert body["detail"] == f"Method {method.upper()} is not allowed at /api/jobs/1."
    assert body["hint"] == ("Send GET to this route (docs/api.md lists each route's "
                            "methods).")


@pytest.mark.parametrize("url", ["/api/jobs/1", "/api/jobs", "/api/audit", "/api/processes/heartbeat"])
def test_every_api_405_is_json_and_anonymous_callers_are_told_to_authenticate_first(staff_client, url):
    response = staff_client.delete(url)
    body = api_error(response, 405, "method_not_allowed")
    assert response["Allow"] and body["hint"].startswith("Send ")
    # Anonymous: 401 before the method check and before CSRF (never csrf_failed), whatever the method.
    for method in ("delete", "post", "put"):
        for header in ({}, {"HTTP_AUTHORIZATION": "Basic c3RhZmY6cGFzcw=="}, {"HTTP_AUTHORIZATION": "Bearer "}):
            anonymous = getattr(Client(enforce_csrf_checks=True), method)(url, **header)
            body = api_error(anonymous, 401, "authentication_required")
            assert body["hint"].startswith("Log in as a staff user"), (method, header)


def test_get_on_a_form_target_answers_the_405_page(manager_client):
    response = manager_client.get("/jobs/launch")
    detail, hint = error_card(response, 405, "method_not_allowed")
    assert response["Allow"] == "POST"
    assert detail == "Method GET is not allowed at /jobs/launch."
    assert hint == ("This address only receives form submissions (POST); go back to the page with the form "
                    "and submit it there.")


def test_a_wrong_method_on_a_page_answers_the_405_page(staff_client):
    detail, hint = error_card(staff_client.delete("/jobs/"), 405, "method_not_allowed")
    assert detail == "Method DELETE is not allowed at /jobs/."
    assert hint == "This address only takes GET; open it from the navigation above."


def test_the_thread_api_keeps_its_own_405(staff_client):
    response = staff_client.put("/api/threads")
    assert api_error(response, 405, "method_not_allowed")["hint"] == "The thread API is read-only; use GET."


# -- CSRF --------------------------------------------------------------------------------------------------------

@pytest.fixture
def csrf_client(manager) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    return client


def test_a_form_post_without_csrf_token_answers_the_403_page(csrf_client):
    detail, hint = error_card(csrf_client.post("/jobs/launch", {"thread_id": "x"}), 403, "csrf_failed")
    assert detail.startswith("CSRF verification failed: CSRF ")
    assert hint == CSRF_PAGE_HINT == "Reload the page and submit again; your session may have expired."


def test_a_form_post_with_a_stale_token_answers_the_403_page(csrf_client):
    csrf_client.get("/accounts/login/")  # sets the CSRF cookie
    detail, hint = error_card(csrf_client.post("/jobs/launch", {"csrfmiddlewaretoken": "x" * 32}), 403,
                              "csrf_failed")
    assert detail.startswith("CSRF verification failed: CSRF token ") and hint == CSRF_PAGE_HINT


def test_a_logout_without_csrf_token_answers_the_403_page(csrf_client):
    _, hint = error_card(csrf_client.post("/accounts/logout/"), 403, "csrf_failed")
    assert hint == CSRF_PAGE_HINT


def test_an_api_post_without_csrf_token_answers_json_403(csrf_client):
    body = api_error(csrf_client.post("/api/threads"), 403, "csrf_failed")
    assert body["detail"].startswith("CSRF verification failed: CSRF ")
    assert body["hint"] == CSRF_API_HINT


# -- 400, 403, 500 -----------------------------------------------------------------------------------------------

def test_a_host_not_served_answers_the_400_page(staff_user):
    client = Client(HTTP_HOST="evil.example")
    detail, hint = error_card(client.get("/jobs/"), 400, "bad_request")
    assert detail == "The server could not accept this request."
    assert hint == "Open the dashboard by one of its configured addresses (DJANGO_ALLOWED_HOSTS)."
    body = api_error(client.get("/api/threads"), 400, "bad_request")
    assert body["hint"] == hint


@pytest.fixture
def failing_list(monkeypatch):
    """Makes the thread list raise ``exc`` (a stand-in for a bug in a view)."""
    from dashboard.threads import services

    def fail(exc: Exception) -> None:
        def raise_(*args, **kwargs):
            raise exc
        monkeypatch.setattr(services, "list_threads", raise_)

    return fail


def test_permission_denied_answers_the_403_page_and_json(staff_client, failing_list, sqlite_fixture_db, runtime_for):
    runtime_for(sqlite_fixture_db, "delta")
    failing_list(PermissionDenied("secret internals"))
    detail, hint = error_card(staff_client.get("/threads/"), 403, "permission_denied")
    assert detail == "You may not do this."
    assert hint == "Ask an administrator for the permission, or log in as another user."
    assert api_error(staff_client.get("/api/threads"), 403, "permission_denied")["hint"] == hint


def test_an_unexpected_error_answers_500_without_a_traceback(staff_user, failing_list, sqlite_fixture_db,
                                                              runtime_for):
    runtime_for(sqlite_fixture_db, "delta")
    failing_list(RuntimeError("secret internals"))
    client = Client(raise_request_exception=False)
    client.force_login(staff_user)
    hint = ("This is a bug, not something you did: retry, and if it persists report the time and the address; "
            "the traceback is in the server log.")
    page = client.get("/threads/")
    detail, page_hint = error_card(page, 500, "server_error")
    assert detail == "The server failed while answering GET /threads/." and page_hint == hint
    api = client.get("/api/threads")
    body = api_error(api, 500, "server_error")
    assert body == {"detail": "The server failed while answering GET /api/threads.", "hint": hint,
                    "code": "server_error"}
    assert b"secret internals" not in page.content + api.content and b"Traceback" not in page.content
