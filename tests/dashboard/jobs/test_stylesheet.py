"""The site stylesheet (``dashboard/static/dashboard/app.css``) as the job and audit pages use it.

A tiny rule reader (``selector, ... { declarations }``) and a matcher for the
last compound selector of a rule (``tag.class#id``) are enough to ask "which
rules style this element?".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from tests.dashboard.jobs.pages import tags

pytestmark = pytest.mark.django_db

CSS = Path(settings.BASE_DIR) / "dashboard" / "static" / "dashboard" / "app.css"


def _rules() -> list[tuple[list[str], dict[str, str]]]:
    text = re.sub(r"/\*.*?\*/", "", CSS.read_text(), flags=re.S)
    out = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", text):
        decls = dict(tuple(p.strip() for p in d.split(":", 1)) for d in body.split(";") if ":" in d)
        out.append(([s.strip() for s in selectors.split(",")], decls))
    return out


def _matches(selector: str, tag: str, attrs: dict) -> bool:
    """``selector``'s last compound (no pseudo-classes) matches an element with ``tag`` and ``attrs``."""
    last = re.split(r"[\s>+~]+", selector.strip())[-1]
    if ":" in last:
        return False
    name = re.match(r"^[a-z0-9]*", last).group(0)
    classes = set(re.findall(r"\.([\w-]+)", last))
    ids = re.findall(r"#([\w-]+)", last)
    return ((not name or name == tag) and classes <= set((attrs.get("class") or "").split())
            and all(i == attrs.get("id") for i in ids))


def _declarations_for(tag: str, attrs: dict) -> dict[str, str]:
    found: dict[str, str] = {}
    for selectors, decls in _rules():
        if any(_matches(s, tag, attrs) for s in selectors):
            found.update(decls)
    return found


def _decls(selector: str) -> dict[str, str]:
    """Declarations of every rule listing exactly ``selector``."""
    found: dict[str, str] = {}
    for selectors, decls in _rules():
        if selector in selectors:
            found.update(decls)
    return found


@pytest.mark.parametrize("state", ["succeeded", "failed"])
def test_a_job_state_colours_its_label_not_the_whole_card(finished_job, viewer_client, state):
    job = finished_job("dry_run", {"thread_ids": ["delta-f10-1t"] if state == "succeeded" else ["nope"]})
    assert job.state == state
    html = viewer_client.get(f"/jobs/{job.pk}/").content

    (card,) = tags(html, "div", id="job")
    assert not {"color", "font-weight"} & set(_declarations_for("div", card)), card
    (label,) = tags(html, "span", id="job-state")
    assert "color" in _declarations_for("span", label) and "font-weight" in _declarations_for("span", label)


def test_the_jobs_list_colours_the_state_label(finished_job, viewer_client):
    finished_job("dry_run", {"thread_ids": ["nope"]})
    (label,) = tags(viewer_client.get("/jobs/").content, "span", **{"class": "state state-failed"})
    assert _declarations_for("span", label)["color"] == "var(--err)"


def test_grid_cells_never_break_words_mid_word():
    for selector in ("table.grid th", "table.grid td"):
        assert "break-all" not in _declarations_for(selector.split()[-1], {}).get("word-break", ""), selector
    header = _declarations_for("th", {})
    assert header.get("overflow-wrap", "normal") == "normal"
    assert _decls(".badge").get("white-space") == "nowrap"


def test_ids_in_grid_cells_wrap_anywhere():
    for selector in ("table.grid td a", "table.grid td code", "table.grid td:first-child"):
        assert _decls(selector)["overflow-wrap"] == "anywhere", selector
    assert _decls("table.grid .badge")["overflow-wrap"] == "normal"
    assert "break-all" not in _decls("dl.facts dd").get("word-break", "")
