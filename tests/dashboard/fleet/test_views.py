"""The /audit/ page (dashboard.fleet.views) and its htmx fragment."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client

from dashboard.fleet.control import recent_live_check
from deerflow.inventory.listing import THREAD_CLASSES

pytestmark = pytest.mark.django_db


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.rows: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        if tag == "tr" and (attrs.get("class") or "").startswith("state-"):
            self.rows.append(attrs["class"])


def parse(html: str) -> _Links:
    parser = _Links()
    parser.feed(html)
    return parser


@pytest.fixture
def rt(runtime_for, sqlite_fixture_db):
    return runtime_for(sqlite_fixture_db, "delta", 10)


def test_audit_page_is_for_staff(rt, outsider_user):
    anonymous = Client().get("/audit/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    outsider = Client()
    outsider.force_login(outsider_user)
    assert outsider.get("/audit/").status_code == 302


def test_audit_page_shows_findings_processes_census_and_readiness(rt, staff_client, process_row):
    web = process_row("web", snapshot_frequency=10)
    w25 = process_row("worker", snapshot_frequency=25)
    stopped = process_row("worker", mode="full", stopped=True)
    response = staff_client.get("/audit/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and 'id="audit-body"' in html and 'hx-get="/audit/"' in html
    # The finding, worded so the operator sees what differs.
    assert 'data-code="cadence_mismatch"' in html
    assert f"{w25.name} differs from {web.name} in: snapshot_frequency 25 ≠ 10" in html
    # Processes table: one row per registry row, with its state.
    page = parse(html)
    assert sorted(page.rows) == ["state-live", "state-live", "state-stopped"]
    for row in (web, w25, stopped):
        assert row.name in html
    # Census: every class links to the filtered thread list.
    for cls in THREAD_CLASSES:
        assert f"/threads/?thread_class={cls}" in page.hrefs
    assert re.search(r'thread_class=migrated">migrated</a></td><td class="num">1</td>', html)
    # Readiness links to the threads that still need conversion.
    assert "/threads/?mode=delta" in page.hrefs
    assert "19 threads still need conversion to full" in html
    # ... and to the legacy threads compaction would shrink (issue 11, item 4).
    compact = page_item(html, "readiness-compact")
    assert compact.startswith("✗ compact legacy threads: 9 threads in full storage")
    assert '<a href="/threads/?mode=full">compact legacy threads' in html


def test_census_links_lead_to_the_filtered_list(rt, staff_client):
    html = staff_client.get("/audit/").content.decode()
    for href in [h for h in parse(html).hrefs if "thread_class=" in h]:
        listed = staff_client.get(href)
        assert listed.status_code == 200, href
    migrated = staff_client.get("/threads/?thread_class=migrated").content.decode()
    assert "migrated-full20-delta20" in migrated and "delta-f10-50t" not in migrated
    inconsistent = staff_client.get("/threads/?thread_class=inconsistent").content.decode()
    assert "markerless-delta-f10-13t" in inconsistent and "full-tools-30t" not in inconsistent


def test_htmx_refresh_returns_only_the_body_fragment(rt, staff_client, process_row):
    process_row("web")
    response = staff_client.get("/audit/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and "<body" not in html and 'id="audit-body"' not in html
    assert "<h2>Findings" in html and 'id="processes"' in html and "Thread census" in html


def test_empty_registry_says_so(rt, staff_client):
    recent_live_check(10, background=False)  # the page shows the newest check; here, one made now
    html = staff_client.get("/audit/").content.decode()
    assert "No process has registered yet." in html
    assert "Live check: 0 workers answered" in html


def page_item(html: str, element_id: str) -> str:
    """The text of the element ``id=element_id`` (tags dropped, spaces collapsed)."""
    m = re.search(rf'<li[^>]*id="{element_id}"[^>]*>(.*?)</li>', html, re.S)
    assert m, element_id
    return " ".join(re.sub(r"<[^>]+>", "", m.group(1)).split())
