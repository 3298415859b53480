"""Template filters of the job pages (``dashboard.jobs.templatetags.job_tags``)."""

from __future__ import annotations

from dashboard.jobs.templatetags.job_tags import IDS_SHOWN, selection_text


def test_thread_and_backup_lists_are_named():
    assert selection_text({"thread_ids": ["a", "b", "c"]}) == "threads: a, b, c"
    assert selection_text({"backup_ids": ["20260101T000000-abcd1234"]}) == "backups: 20260101T000000-abcd1234"


def test_long_lists_say_how_many_more():
    ids = [f"t{i}" for i in range(IDS_SHOWN + 5)]
    assert selection_text({"thread_ids": ids}).endswith(f"t{IDS_SHOWN - 1} … (5 more)")


def test_a_filter_omits_empty_criteria():
    selection = {"filter": {"mode": None, "thread_class": None, "q": "f10-1", "updated_before": None,
                            "updated_after": "2026-01-01T00:00:00+00:00"}}
    assert selection_text(selection) == "filter: q = f10-1, updated_after = 2026-01-01T00:00:00+00:00"
    assert selection_text({"filter": {"mode": None}}) == "filter: none (every delta thread)"
    assert selection_text({}) == "—"
