"""dashboard.formatting and its built-in template filters: one way to write times, counts, sizes, plurals and
hidden characters, in every template without a ``{% load %}``."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from django.template import Context, Template

from dashboard import formatting


def render(source: str, **context) -> str:
    return Template(source).render(Context(context))


def test_times_are_one_format_whatever_their_source():
    moment = dt.datetime(2026, 12, 5, 15, 15, 53, 476874, tzinfo=dt.UTC)
    for value in (moment, moment.isoformat(), "2026-12-05T15:15:53.476874Z", moment.replace(tzinfo=None),
                  moment.astimezone(dt.timezone(dt.timedelta(hours=8)))):
        assert formatting.when_text(value) == "2026-12-05 15:15:53 UTC"
    assert formatting.when_text(None) == formatting.when_text("not a time") == "—"
    html = render("{{ t|when }}", t=moment.isoformat())
    assert html == ('<time datetime="2026-12-05T15:15:53.476874+00:00" title="2026-12-05 15:15:53.476874+00:00 '
                    '(UTC, exact)">2026-12-05 15:15:53 UTC</time>')


def test_counts_sizes_and_plurals():
    assert formatting.count(2272) == "2,272" and formatting.count(True) is True and formatting.count("x") == "x"
    assert formatting.plural(1, "thread") == "1 thread"
    assert formatting.plural(1200, "thread") == "1,200 threads"
    assert formatting.plural(0, "thread") == "0 threads"
    assert formatting.plural(["a"], "thread matches,threads match") == "1 thread matches"
    assert formatting.plural(2, "thread matches,threads match") == "2 threads match"
    assert formatting.size(978_637) == "955.7\xa0KB" and formatting.size(None) == "—"  # the unit never wraps
    assert render('{{ n|plural:"checkpoint" }} · {{ n|thousands }} · {{ b|size }}', n=2272, b=1024) == \
        "2,272 checkpoints · 2,272 · 1.0\xa0KB"


@pytest.mark.parametrize(("name", "shown"), [
    ("evil\u202eexe.txt", "evil\\u202eexe.txt"),
    ("a\u2066b\u2069", "a\\u2066b\\u2069"),
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("plain-name", "plain-name"),
])
def test_direction_overrides_and_hidden_characters_are_visible_escapes(name, shown):
    assert formatting.reveal_controls(name) == shown
    assert render("{{ n|reveal }}", n=name) == shown
    assert render("{{ n|reveal }}", n="<b>\u202e</b>") == "&lt;b&gt;\\u202e&lt;/b&gt;"  # still escaped


def test_no_message_writes_a_plural_placeholder():
    """Counts in messages agree with their noun (``1 thread``, ``2 threads``), never ``thread(s)``: every
    ``word(s)`` / ``word(es)`` in dashboard/ and templates/ is listed by file and line."""
    root = Path(__file__).resolve().parents[2]
    files = [p for p in (root / "dashboard").rglob("*.py") if "migrations" not in p.parts]
    files += list((root / "templates").rglob("*.html"))
    found = [f"{p.relative_to(root)}:{n}: {line.strip()}" for p in sorted(files)
             for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"[a-z]\((e?s)\)", line)]
    assert found == []


def test_the_templates_pluralize_their_counts():
    """The thread list's refresh note and the audit page's cache line read right for one and for many."""
    from django.template.loader import render_to_string

    one = render_to_string("threads/_rows.html", {"refreshed": {"kind": "full", "threads": 1, "seconds": 0.1,
                                                                "missing": 1}})
    many = render_to_string("threads/_rows.html", {"refreshed": {"kind": "full", "threads": 1200, "seconds": 0.1,
                                                                 "missing": 2}})
    assert "Summary refreshed: full, 1 thread recomputed in 0.1 s (it missed 1 checkpoint written" in one
    assert "Summary refreshed: full, 1,200 threads recomputed in 0.1 s (it missed 2 checkpoints written" in many


def test_middle_ellipsis_keeps_both_ends_within_the_width():
    assert formatting.middle_ellipsis("thread-0123456789-final", 12) == "thread…final"
    assert formatting.middle_ellipsis("short", 12) == "short"
    assert formatting.middle_ellipsis("abcdefghijkl", 12) == "abcdefghijkl"  # exactly the width: unchanged
    assert formatting.middle_ellipsis("abcdefghijklm", 12) == "abcdef…ijklm"
    wide = formatting.middle_ellipsis("線程線程線程線程", 9)  # two cells a character
    assert wide == "線程…線程" and formatting.columns(wide) == 9
    assert formatting.columns(formatting.middle_ellipsis("線程線程線程線程", 8)) <= 8
    with pytest.raises(ValueError, match="at least 3 cells; got 2"):
        formatting.middle_ellipsis("abcdef", 2)
