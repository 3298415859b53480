"""``manage.py convert_threads --to delta``: dry run totals, fleet refusal, confirmation, compaction, exit codes."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from dashboard.fleet.models import ProcessRecord
from deerflow import convert

pytestmark = pytest.mark.django_db

FULL = ["full-short-3t", "full-rollback", "migrated-full20-delta20"]


def run(*args: str) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of the command."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("convert_threads", *args, stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        code, err = exc.returncode, io.StringIO(err.getvalue() + str(exc))
    return code, out.getvalue(), err.getvalue()


def _markers(db, thread_id: str) -> set:
    with sqlite3.connect(Path(db.sqlite_dir) / "deerflow.db") as conn:
        return {json.loads(m).get("deerflow_checkpoint_channel_mode") for (m,) in conn.execute(
            "SELECT metadata FROM checkpoints WHERE thread_id = ?", (thread_id,))}


def _full_mode_process(name: str = "web@old-host:1") -> ProcessRecord:
    now = timezone.now()
    return ProcessRecord.objects.create(instance_id=name, role="web", name=name, host="old-host", pid=1,
                                        started_at=now, last_heartbeat=now, mode="full", snapshot_frequency=10,
                                        config_path="/etc/deerflow/config.yaml")


def test_dry_run_prints_bytes_and_snapshot_positions_and_writes_nothing(delta_rt, small_db):
    code, out, err = run("--to", "delta", "--thread", "full-rollback", "--thread", "delta-f10-9t", "--dry-run")
    assert code == 0, err
    assert "needs_compaction         full-rollback" in out and "already_delta            delta-f10-9t" in out
    line = next(x for x in out.splitlines() if "full-rollback" in x)
    assert "bytes now" in line and "after" in line and "freed" in line and "snapshots " in line and "at steps [" in line
    assert "total: 1 thread; bytes now" in out and "would free" in out
    assert "answers 409" in out
    assert convert.list_backups(small_db) == [] and _markers(small_db, "full-rollback") == {None}


def test_all_yes_compacts_every_full_and_migrated_thread(delta_rt, small_db):
    code, out, err = run("--to", "delta", "--all", "--yes")
    assert code == 0, err
    assert out.count("  compacted ") == len(FULL) and "Reclaim disk:" in out
    assert {b.thread_id for b in convert.list_backups(small_db)} == set(FULL)
    for thread_id in FULL:
        assert _markers(small_db, thread_id) == {"delta"}, thread_id
    # nothing left to do
    code, out, _ = run("--to", "delta", "--all", "--yes")
    assert code == 0 and "total: 0 threads" in out


def test_a_live_full_mode_process_refuses_unless_forced(delta_rt, small_db):
    _full_mode_process()
    code, out, err = run("--to", "delta", "--thread", "full-short-3t", "--yes")
    assert code == 2
    assert "web@old-host:1" in out and "--force-full-fleet" in err
    assert "Refused: 1 live process of the fleet runs in full mode" in err
    assert convert.list_backups(small_db) == []
    code, out, err = run("--to", "delta", "--thread", "full-short-3t", "--yes", "--force-full-fleet")
    assert code == 0, err
    assert [b.thread_id for b in convert.list_backups(small_db)] == ["full-short-3t"]


def test_a_stopped_full_mode_process_does_not_refuse(delta_rt, small_db):
    _full_mode_process().__class__.objects.update(stopped_at=timezone.now())
    code, _out, err = run("--to", "delta", "--thread", "full-short-3t", "--yes")
    assert code == 0, err


def test_a_failed_thread_makes_the_exit_status_1(delta_rt):
    code, out, err = run("--to", "delta", "--thread", "full-short-3t", "--thread", "no-such-thread", "--yes")
    assert code == 1 and "1 thread failed" in err
    assert "not_found" in out and "hint: Check the thread id." in out and "  compacted " in out


def test_without_yes_and_without_a_terminal_nothing_is_compacted(delta_rt, small_db, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, _, err = run("--to", "delta", "--thread", "full-short-3t")
    assert code == 2 and "pass --yes" in err
    assert convert.list_backups(small_db) == []


def test_a_full_mode_process_cannot_compact(runtime_for, small_db):
    runtime_for(small_db, "full")
    code, out, err = run("--to", "delta", "--thread", "full-short-3t", "--dry-run")
    assert code == 2 and out == "" and "froze checkpoint_channel_mode=full" in err
