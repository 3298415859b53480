"""dashboard.formatting and its built-in template filters: one way to write times, counts, sizes, plurals and
hidden characters, in every template without a ``{% load %}``."""

from __future__ import annotations

import datetime as dt

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
