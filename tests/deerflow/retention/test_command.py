"""``manage.py prune_threads``: the fixed interface (flags, ``--json`` shape, exit codes), in-process and as a
subprocess, and ``--reclaim`` shrinking the SQLite file."""

from __future__ import annotations

import io
import json
import subprocess

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.configs import write_config
from tests.dashboard.jobs.conftest import shrink
from tests.deerflow.convert.support import all_rows, backup_ids, open_saver, raw_rows
from tests.deerflow.retention.support import ids
from tests.integration import helpers

KEYS = {"thread_id", "status", "deleted_checkpoint_ids", "kept_checkpoint_ids", "protected_checkpoint_ids",
        "rebased_checkpoint_ids", "bytes_before", "bytes_after"}
SMALL = ["delta-f10-9t", "delta-f10-fork", "full-short-3t", "full-rollback"]


@pytest.fixture
def small(sqlite_fixture_db_rw):
    """The fixture's small threads, opened once by the saver (its ``setup()`` adds ``writes.task_path``)."""
    with open_saver(sqlite_fixture_db_rw):
        pass
    return shrink(sqlite_fixture_db_rw, SMALL)


@pytest.fixture
def delta(runtime_for, small):
    runtime_for(small, "delta")
    return small


def run(*args: str) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)``."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("prune_threads", *args, stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        code, err = exc.returncode, io.StringIO(err.getvalue() + str(exc))
    return code, out.getvalue(), err.getvalue()


def test_keep_last_json_has_exactly_the_contract_shape(delta):
    code, out, err = run("--thread", "delta-f10-9t", "--thread", "full-short-3t", "--keep-last", "3", "--yes", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) == {"threads", "reclaimed"} and data["reclaimed"] is None
    assert [set(row) for row in data["threads"]] == [KEYS, KEYS]
    nine, full = data["threads"]
    assert (nine["thread_id"], nine["status"], full["status"]) == ("delta-f10-9t", "pruned", "pruned")
    assert nine["kept_checkpoint_ids"] == ids(delta, "delta-f10-9t") and len(nine["kept_checkpoint_ids"]) == 3
    assert len(nine["rebased_checkpoint_ids"]) == 1 and full["rebased_checkpoint_ids"] == []
    assert nine["kept_checkpoint_ids"][-1] in nine["protected_checkpoint_ids"]
    assert nine["bytes_after"] < nine["bytes_before"]
    assert len(backup_ids(delta)) == 2


def test_dry_run_writes_nothing_and_previews(delta):
    before = all_rows(delta)
    code, out, err = run("--all", "--keep-last", "2", "--dry-run")
    assert code == 0, err
    assert out.count("would_prune") == 4 and "(estimate)" in out and "protected" in out and ": head" in out
    assert "no longer resumable or forkable" in out
    assert all_rows(delta) == before and backup_ids(delta) == []


def test_without_yes_and_without_a_terminal_nothing_is_confirmed(delta, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    before = raw_rows(delta, "delta-f10-fork")
    code, out, err = run("--thread", "delta-f10-fork", "--safe-only", "--json")
    assert code == 2 and "pass --yes" in err and "Not confirmed" in err
    assert json.loads(out)["threads"][0]["status"] == "would_prune"
    assert raw_rows(delta, "delta-f10-fork") == before


def test_a_failed_thread_exits_1_and_the_others_are_pruned(delta):
    code, out, err = run("--thread", "no-such-thread", "--thread", "delta-f10-9t", "--keep-last", "2", "--yes",
                         "--json")
    assert code == 1 and "1 thread failed" in err and "Check the thread id." in err
    statuses = {r["thread_id"]: r["status"] for r in json.loads(out)["threads"]}
    assert statuses == {"no-such-thread": "not_found", "delta-f10-9t": "pruned"}


def test_an_empty_selection_is_an_empty_report(delta):
    code, out, err = run("--idle-days", "100000", "--delete-threads", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out) == {"threads": [], "reclaimed": None}


def test_idle_days_selects_by_the_newest_checkpoint_and_delete_threads_deletes(delta):
    code, out, err = run("--idle-days", "0", "--delete-threads", "--protect", ids(delta, "full-rollback")[0],
                         "--yes", "--json")
    assert code == 1  # the thread holding the protected checkpoint is refused
    rows = {r["thread_id"]: r for r in json.loads(out)["threads"]}
    assert set(rows) == set(SMALL)
    assert rows["full-rollback"]["status"] == "blocked" and ids(delta, "full-rollback")
    assert all(rows[t]["status"] == "deleted" and rows[t]["bytes_after"] == 0 for t in SMALL if t != "full-rollback")
    assert ids(delta, "delta-f10-9t") == []


@pytest.mark.parametrize("args, message", [
    (["--all", "--keep-last", "0"], "--keep-last must be at least 1"),
    (["--all", "--keep-last", "x"], "--keep-last needs a whole number"),
    (["--all", "--idle-days", "1", "--safe-only"], "not allowed with argument"),
    (["--idle-days", "-1", "--safe-only"], "--idle-days must be 0 or more"),
    (["--all"], "one of the arguments --keep-last --safe-only --delete-threads is required"),
])
def test_bad_flags_are_clear_errors(delta, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("prune_threads", *args)


def test_a_full_mode_process_refuses(runtime_for, small):
    runtime_for(small, "full")
    code, out, err = run("--all", "--keep-last", "2", "--yes")
    assert code == 2 and out == ""
    assert "froze checkpoint_channel_mode=full" in err and "delta-mode config.yaml" in err


def test_reclaim_shrinks_the_sqlite_file(runtime_for, sqlite_fixture_db_rw):
    runtime_for(sqlite_fixture_db_rw, "delta")
    code, out, err = run("--all", "--keep-last", "1", "--no-backup", "--reclaim", "--yes", "--json")
    assert code == 0, err
    data = json.loads(out)
    reclaimed = data["reclaimed"]
    assert set(reclaimed) == {"file_bytes_before", "file_bytes_after"}
    assert reclaimed["file_bytes_after"] < reclaimed["file_bytes_before"] // 4, reclaimed
    assert all(r["status"] in ("pruned", "nothing_to_prune") for r in data["threads"])
    print(f"\nreclaim: {reclaimed}")


def _manage(tmp_path, database, *args: str) -> subprocess.CompletedProcess:
    var = tmp_path / "var"
    var.mkdir(exist_ok=True)
    config = write_config(tmp_path / "config.yaml", database, "delta")
    env = helpers.dashboard_env(config_path=config, var_dir=var)
    return subprocess.run([helpers.PYTHON, "manage.py", "prune_threads", *args], cwd=helpers.REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_as_a_subprocess_json_and_exit_codes(tmp_path, small):
    proc = _manage(tmp_path, small, "--thread", "delta-f10-fork", "--keep-last", "4")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "pass --yes" in proc.stderr
    proc = _manage(tmp_path, small, "--thread", "delta-f10-fork", "--keep-last", "4", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    [row] = json.loads(proc.stdout)["threads"]
    assert set(row) == KEYS and row["status"] == "pruned" and len(row["kept_checkpoint_ids"]) == 4
    proc = _manage(tmp_path, small, "--all", "--keep-last", "0")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "at least 1" in proc.stderr


def test_revert_prune_command_restores_byte_for_byte(delta):
    original = raw_rows(delta, "delta-f10-fork")
    code, out, err = run("--thread", "delta-f10-fork", "--keep-last", "2", "--yes")
    assert code == 0, err
    backup = out.split("backup ", 1)[1].split()[0]
    assert raw_rows(delta, "delta-f10-fork") != original
    out, err = io.StringIO(), io.StringIO()
    call_command("revert_prune", backup, "--json", stdout=out, stderr=err)
    [row] = json.loads(out.getvalue())["reverted"]
    assert (row["status"], row["thread_id"]) == ("reverted", "delta-f10-fork")
    assert raw_rows(delta, "delta-f10-fork") == original
    with pytest.raises(CommandError, match="could not be restored"):
        call_command("revert_prune", backup, stdout=io.StringIO(), stderr=io.StringIO())
