"""The login page: staff accounts only, refused at login with a message and a hint; a non-staff session is named.

Personas: ``staff``, ``outsider`` (not staff), anonymous.
"""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard.accounts.forms import LOGIN_FAILED, LOGIN_FAILED_HINT, NOT_STAFF_HINT
from tests.dashboard.html import parse

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def _alert(response, element_id: str) -> tuple[str, str]:
    """``(detail, hint)`` of the login page's alert ``element_id``."""
    (alert,) = parse(response.content).find_all("div", id=element_id)
    (detail,) = alert.find_all("p", cls="detail")
    (hint,) = alert.find_all("p", cls="hint")
    return detail.text, hint.text.removeprefix("What to do:").strip()


def test_it_refuses_a_non_staff_account_at_login_with_the_message_and_hint(outsider_user):
    client = Client()
    response = client.post(LOGIN, {"username": "outsider", "password": "outsider-pass", "next": "/threads/"})
    assert response.status_code == 200
    assert _alert(response, "login-error") == (LOGIN_FAILED, LOGIN_FAILED_HINT)
    assert LOGIN_FAILED == "Your username and password didn't match, or the account is not staff."
    assert "_auth_user_id" not in client.session  # not logged in: no redirect loop
    assert client.get("/threads/")["Location"].startswith(LOGIN)


def test_it_refuses_a_wrong_password_with_the_same_message_and_hint(staff_user):
    response = Client().post(LOGIN, {"username": "staff", "password": "wrong"})
    assert response.status_code == 200
    assert _alert(response, "login-error") == (LOGIN_FAILED, LOGIN_FAILED_HINT)
    assert "case-sensitive" in LOGIN_FAILED_HINT and "staff" in LOGIN_FAILED_HINT


def test_it_logs_a_staff_account_in(staff_user):
    client = Client()
    response = client.post(LOGIN, {"username": "staff", "password": "staff-pass"})
    assert response.status_code == 302 and response["Location"] == "/threads/"
    assert client.session["_auth_user_id"] == str(staff_user.pk)


def test_a_non_staff_session_is_told_who_it_is_and_how_to_get_out(outsider_user):
    client = Client()
    client.force_login(outsider_user)
    response = client.get("/jobs/", follow=True)
    assert response.redirect_chain[-1][0].startswith(LOGIN)
    detail, hint = _alert(response, "not-staff")
    assert detail == "You are logged in as outsider, which is not a staff account."
    assert hint == NOT_STAFF_HINT == ("Log out, then log in with a staff account (or ask an administrator to mark "
                                      "your account as staff).")
    (alert,) = parse(response.content).find_all("div", id="not-staff")
    (logout,) = alert.find_all("form")
    assert logout.attrs["action"] == "/accounts/logout/" and logout.attrs["method"] == "post"
    assert not parse(response.content).find_all("div", id="login-error")


@pytest.mark.parametrize("persona", ["anonymous", "staff"])
def test_other_visitors_see_no_not_staff_notice(persona, staff_user):
    client = Client()
    if persona == "staff":
        client.force_login(staff_user)
    response = client.get(LOGIN)
    assert response.status_code == 200
    assert not parse(response.content).find_all("div", id="not-staff")
    assert "Staff accounts only." in response.content.decode()
