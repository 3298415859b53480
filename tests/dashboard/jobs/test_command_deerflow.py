"""``prune_threads`` and ``revert_prune`` beside a live DeerFlow (both backends): DeerFlow's reservation per
thread, ``run_in_flight``, no reservation left; ``--max-delete-per-run`` honoured and a negative one refused."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deerflow.convert import list_backups
from tests.dashboard.jobs.deerflow_support import reservation_rows
from tests.deerflow.convert.support import raw_rows
from tests.deerflow_schema import insert_run

pytestmark = pytest.mark.django_db

THREADS = ["delta-f10-9t", "delta-f10-10t", "delta-f10-fork"]


def run(command: str, *args: str) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)``."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(command, *args, stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        code, err = exc.returncode, io.StringIO(err.getvalue() + str(exc))
    return code, out.getvalue(), err.getvalue()


def _threads(*names: str) -> list[str]:
    return [arg for name in names for arg in ("--thread", name)]


def test_prune_threads_skips_a_thread_deerflow_is_running_and_reverts_under_the_reservation(runtime_for,
                                                                                            deerflow_db):
    runtime_for(deerflow_db, "delta")
    run_id = insert_run(deerflow_db, THREADS[0], status="running")
    before = raw_rows(deerflow_db, THREADS[0])
    code, out, err = run("prune_threads", *_threads(*THREADS[:2]), "--keep-last", "2", "--yes", "--json")
    assert code == 1 and run_id in err
    rows = {r["thread_id"]: r["status"] for r in json.loads(out)["threads"]}
    assert rows == {THREADS[0]: "run_in_flight", THREADS[1]: "pruned"}
    assert raw_rows(deerflow_db, THREADS[0]) == before
    assert reservation_rows(deerflow_db) == []

    [backup] = [b for b in list_backups(deerflow_db, THREADS[1]) if b.note == "cli:prune_threads"]
    insert_run(deerflow_db, THREADS[1], status="pending")
    code, out, err = run("revert_prune", backup.backup_id, "--json")
    assert code == 1 and json.loads(out)["reverted"][0]["status"] == "run_in_flight"


def test_max_delete_per_run_stops_the_command_and_reports_where(runtime_for, deerflow_db):
    runtime_for(deerflow_db, "delta")
    code, out, err = run("prune_threads", *_threads(*THREADS), "--keep-last", "2", "--max-delete-per-run", "2",
                         "--yes", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [r["status"] for r in data["threads"]] == ["pruned", "pruned", "skipped"]
    assert data["max_delete_per_run"] == {"max_delete_per_run": 2, "stopped_at": 2, "skipped": 1}
    code, out, err = run("prune_threads", *_threads(*THREADS), "--delete-threads", "--max-delete-per-run", "1",
                         "--dry-run")
    assert code == 0 and "stopped at the cap: 1 thread to prune or delete" in out


@pytest.mark.parametrize("value", ["-1", "two", "1.5"])
def test_a_bad_max_delete_per_run_is_refused(runtime_for, deerflow_db, value):
    runtime_for(deerflow_db, "delta")
    before = raw_rows(deerflow_db, THREADS[0])
    with pytest.raises(CommandError, match="max-delete-per-run"):
        call_command("prune_threads", "--thread", THREADS[0], "--delete-threads", "--yes",
                     "--max-delete-per-run", value)
    assert raw_rows(deerflow_db, THREADS[0]) == before


def test_convert_threads_to_delta_takes_the_reservation_and_skips_a_thread_deerflow_is_running(runtime_for,
                                                                                               deerflow_db):
    runtime_for(deerflow_db, "delta")
    run_id = insert_run(deerflow_db, "full-rollback", status="pending")
    held = raw_rows(deerflow_db, "full-rollback")
    code, out, err = run("convert_threads", "--to", "delta", "--thread", "full-short-3t", "--thread",
                         "full-rollback", "--yes")
    assert code == 1, (out, err)
    assert run_id in out + err
    assert raw_rows(deerflow_db, "full-rollback") == held
    assert reservation_rows(deerflow_db) == []
    code, out, err = run("convert_threads", "--to", "delta", "--thread", "full-short-3t", "--dry-run")
    assert "already_delta" in out  # the other thread was compacted under its reservation
