""""Convert to full", step 1: the action on the thread page, the 409 page and the thread list; POST /jobs/launch."""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard.jobs.models import ConversionJob
from tests.dashboard.jobs.conftest import DELTA_SMALL
from tests.dashboard.jobs.pages import form_inputs, tags

pytestmark = pytest.mark.django_db


def _convert_forms(html: bytes) -> list:
    return tags(html, "form", id="convert-to-full")


def test_it_offers_convert_on_a_delta_thread_page(delta_rt, manager_client):
    html = manager_client.get("/threads/delta-f10-9t/").content
    forms = _convert_forms(html)
    assert len(forms) == 1 and forms[0]["action"] == "/jobs/launch" and forms[0]["method"] == "post"
    hidden = form_inputs(html, "convert-to-full")
    assert hidden["thread_id"] == "delta-f10-9t" and hidden["csrfmiddlewaretoken"]


def test_it_does_not_offer_convert_on_a_full_thread(delta_rt, manager_client):
    assert _convert_forms(manager_client.get("/threads/full-short-3t/").content) == []


def test_a_viewer_sees_why_there_is_no_button(delta_rt, viewer_client):
    body = viewer_client.get("/threads/delta-f10-9t/").content.decode()
    assert "needs the permission jobs.manage_conversions" in body


def test_the_409_page_offers_the_conversion(runtime_for, small_db, manager_client):
    runtime_for(small_db, "full")
    response = manager_client.get("/threads/delta-f10-9t/")
    assert response.status_code == 409
    assert len(_convert_forms(response.content)) == 1


def test_the_thread_list_offers_convert_matching_threads(delta_rt, manager_client, viewer_client):
    (button,) = tags(manager_client.get("/threads/?mode=delta").content, "button", hx_post="/jobs/launch")
    assert button["hx-include"] == "closest form"
    assert "/jobs/launch" not in viewer_client.get("/threads/").content.decode()


def test_launch_starts_a_dry_run_and_redirects_to_its_page(delta_rt, manager_client, manager):
    response = manager_client.post("/jobs/launch", {"thread_id": ["delta-f10-9t", "delta-f10-fork"]})

    job = ConversionJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert (job.kind, job.state, job.created_by, job.integrity) == ("dry_run", "queued", manager, True)
    assert job.selection == {"thread_ids": ["delta-f10-9t", "delta-f10-fork"]}


def test_launch_by_filter_from_htmx_redirects_the_client(delta_rt, manager_client):
    response = manager_client.post("/jobs/launch", {"mode": "", "thread_class": "migrated", "q": ""},
                                   headers={"HX-Request": "true"})
    job = ConversionJob.objects.get()
    assert response.status_code == 200 and response["HX-Redirect"] == f"/jobs/{job.pk}/"
    assert job.selection["filter"]["thread_class"] == "migrated"
    assert (job.state, job.results.count()) == ("resolving", 0)  # the worker resolves the filter
    from dashboard.jobs import resolving
    assert resolving.resolve(job.pk) == 1
    assert list(job.results.values_list("thread_id", flat=True)) == ["migrated-full20-delta20"]


def test_launch_of_nothing_says_so(delta_rt, manager_client):
    response = manager_client.post("/jobs/launch", {"q": "no-such-thread"})
    assert response.status_code == 400 and b"no_threads" in response.content
    assert b"No delta thread matches this filter" in response.content
    assert not ConversionJob.objects.exists()


def test_a_filter_of_full_threads_says_they_need_no_conversion(delta_rt, manager_client):
    """The thread list filtered to full threads offers "Convert matching threads": ten match, none is delta."""
    response = manager_client.post("/jobs/launch", {"mode": "", "thread_class": "full", "q": ""})
    assert response.status_code == 400
    assert b"No delta thread matches this filter: a filter selects delta threads only, and full threads need no " \
           b"conversion." in response.content
    assert not ConversionJob.objects.exists()


@pytest.mark.parametrize("fields", [{}, {"mode": "", "thread_class": "", "q": "", "sort": ""}],
                         ids=["only the csrf token", "the unfiltered thread list"])
def test_launch_without_threads_or_filter_is_refused(delta_rt, manager_client, fields):
    response = manager_client.post("/jobs/launch", fields, headers={"HX-Request": "true"})

    body = response.content.decode()
    assert response.status_code == 400 and "invalid_selection" in body
    assert "No threads chosen: give a thread id or at least one filter" in body
    assert "to select every delta thread, choose Mode: delta." in body
    assert not ConversionJob.objects.exists()


def test_every_delta_thread_is_an_explicit_mode_filter(delta_rt, manager_client):
    response = manager_client.post("/jobs/launch", {"mode": "delta"})
    job = ConversionJob.objects.get()
    assert response.status_code == 302 and job.selection["filter"]["mode"] == "delta"
    from dashboard.jobs import resolving
    assert job.state == "resolving" and resolving.resolve(job.pk) == len(DELTA_SMALL)
    assert sorted(job.results.values_list("thread_id", flat=True)) == sorted(DELTA_SMALL)


def test_a_viewer_may_not_launch(delta_rt, viewer_client):
    response = viewer_client.post("/jobs/launch", {"thread_id": "delta-f10-9t"})
    assert response.status_code == 403 and b"jobs.manage_conversions" in response.content
    assert not ConversionJob.objects.exists()


def test_anonymous_and_outsiders_are_sent_to_login(delta_rt, django_user_model):
    assert Client().post("/jobs/launch", {"thread_id": "x"}).status_code == 302
    outsider = django_user_model.objects.create_user("outsider", password="x")
    client = Client()
    client.force_login(outsider)
    assert client.post("/jobs/launch", {"thread_id": "x"})["Location"].startswith("/accounts/login/")


def test_launch_enforces_csrf(delta_rt, manager):
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    assert client.post("/jobs/launch", {"thread_id": "delta-f10-9t"}).status_code == 403

    client.get("/threads/delta-f10-9t/")  # sets the CSRF cookie, as a browser would
    token = client.cookies["csrftoken"].value
    response = client.post("/jobs/launch", {"thread_id": "delta-f10-9t", "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and ConversionJob.objects.count() == 1


def test_launch_only_accepts_post(delta_rt, manager_client):
    assert manager_client.get("/jobs/launch").status_code == 405


@pytest.mark.parametrize("url", ["/jobs/launch", "/jobs/compact/launch", "/jobs/prune/launch"])
def test_launching_with_unknown_thread_ids_is_a_400_naming_them(delta_rt, manager, url):
    from django.contrib.auth.models import Permission
    from django.test import Client

    manager.user_permissions.add(Permission.objects.get(codename="manage_retention"))
    manager_client = Client()
    manager_client.force_login(manager)
    fields = {"thread_id": ["delta-f10-1t", "no-such-a", "no-such-b"], "keep_last": "2", "rule": "keep_last"}
    response = manager_client.post(url, fields)
    body = response.content.decode()
    assert response.status_code == 400 and "unknown_threads" in body
    assert "No such threads in the checkpoint database: no-such-a, no-such-b." in body
    assert "delta-f10-1t" not in body.split("No such threads")[1].split(".")[0]
    assert not ConversionJob.objects.exists()
