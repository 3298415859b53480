"""``manage.py conversion_backups [--thread ID] [--purge ID ...]``."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deerflow import convert

pytestmark = pytest.mark.django_db


def _output(*args: str) -> str:
    out = io.StringIO()
    call_command("conversion_backups", *args, stdout=out)
    return out.getvalue()


def test_it_lists_and_purges(delta_rt, small_db):
    one = convert.convert_thread(small_db, "delta-f10-1t", note="by hand").backup_id
    two = convert.convert_thread(small_db, "delta-f10-9t").backup_id

    listing = _output()
    assert one in listing and two in listing and "2 backups; active: 2" in listing and "by hand" in listing
    assert two not in _output("--thread", "delta-f10-1t")

    assert f"purged {one}" in _output("--purge", one)
    assert {b.backup_id: b.status for b in convert.list_backups(small_db)} == {one: "purged", two: "active"}

    with pytest.raises(CommandError, match=r"was already purged: its rows are gone") as again:
        call_command("conversion_backups", "--purge", one, stdout=io.StringIO())
    assert again.value.returncode == 1


def test_purging_an_unknown_backup_exits_1(delta_rt):
    with pytest.raises(CommandError) as caught:
        call_command("conversion_backups", "--purge", "nope", stdout=io.StringIO())
    assert caught.value.returncode == 1 and "nope" in str(caught.value)
