"""``manage.py convert_threads``: same services, in-process; progress on stderr; exit codes."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard.jobs.models import ConversionJob
from deerflow import convert
from tests.dashboard.jobs.conftest import DELTA_SMALL

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of the command."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("convert_threads", *args, stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        code, err = exc.returncode, io.StringIO(err.getvalue() + str(exc))
    return code, out.getvalue(), err.getvalue()


def test_dry_run_writes_nothing_and_exits_0(delta_rt, small_db):
    code, out, err = run("--to", "full", "--thread", "delta-f10-9t", "--thread", "full-short-3t", "--dry-run")

    assert code == 0, err
    assert "needs_conversion           delta-f10-9t" in out and "already_full" in out
    assert "dry run (job " in err and "2/2" in err  # the progress bar
    assert convert.list_backups(small_db) == []
    (job,) = ConversionJob.objects.all()
    assert (job.kind, job.runner, job.state) == ("dry_run", "inline", "succeeded")
    assert job.launched_by.startswith("cli:")


def test_yes_converts_and_records_both_jobs(delta_rt, small_db):
    code, out, err = run("--to", "full", "--thread", "delta-f10-9t", "--thread", "delta-f10-fork", "--yes")

    assert code == 0, err
    assert out.count("converted") == 2 and "backup 2" in out
    dry, job = ConversionJob.objects.order_by("id")
    assert job.kind == "convert" and job.source_job == dry and job.state == "succeeded"
    assert {b.thread_id for b in convert.list_backups(small_db)} == {"delta-f10-9t", "delta-f10-fork"}


def test_all_selects_every_thread_with_delta_evidence(delta_rt):
    code, out, _ = run("--to", "full", "--all", "--dry-run")
    assert code == 0
    dry = ConversionJob.objects.get()
    assert sorted(dry.results.values_list("thread_id", flat=True)) == sorted(DELTA_SMALL)


def test_a_failed_thread_makes_the_exit_status_1(delta_rt):
    code, out, err = run("--to", "full", "--thread", "delta-f10-1t", "--thread", "no-such-thread", "--yes")
    assert code == 1 and "1 thread failed" in err
    assert "not_found" in out and "hint: Check the thread id." in out
    assert ConversionJob.objects.get(kind="convert").state == "succeeded"  # the good thread was converted


def test_a_full_mode_process_stops_before_creating_a_job(runtime_for, small_db):
    """Converting reads delta history: a full-mode process says which config.yaml to use instead."""
    runtime_for(small_db, "full")
    code, out, err = run("--to", "full", "--thread", "delta-f10-9t", "--dry-run")
    assert code == 2 and out == ""
    assert "froze checkpoint_channel_mode=full" in err and "Nothing was done (no job was created)" in err
    assert "DEER_FLOW_CONFIG_PATH pointing at a delta-mode config.yaml" in err
    assert "database.checkpoint_channel_mode: delta" in err
    assert not ConversionJob.objects.exists()


def test_without_yes_and_without_a_terminal_nothing_is_converted(delta_rt, small_db, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, _, err = run("--to", "full", "--thread", "delta-f10-9t")
    assert code == 2 and "pass --yes" in err
    assert convert.list_backups(small_db) == []


def test_the_prompt_accepts_yes(delta_rt, small_db, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty("y\n"))
    code, _, _ = run("--to", "full", "--thread", "delta-f10-1t")
    assert code == 0 and len(convert.list_backups(small_db)) == 1


def test_nothing_to_convert_exits_0(delta_rt):
    code, out, _ = run("--to", "full", "--thread", "full-short-3t")
    assert code == 0 and "already_full" in out
    assert not ConversionJob.objects.filter(kind="convert").exists()


def test_it_needs_a_selection(delta_rt):
    with pytest.raises(CommandError):
        call_command("convert_threads", "--to", "full")
