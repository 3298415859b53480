"""``python manage.py seed_threads`` as an operator runs it: a subprocess, real SQLite and Postgres databases.

* Ctrl-C (SIGINT after the first batch is reported) ends with one message,
  no traceback, exit 130: the threads committed (whole batches, each with
  its summary rows: the summary matches the checkpoints exactly), and that
  a re-run needs another ``--seed`` (the same one is refused);
* the tables loaded are analyzed, so on Postgres the thread list's
  freshness count uses the ``checkpoint_id`` index instead of a sequential
  scan of ``checkpoints``;
* ``--turns-min`` above ``--turns-max`` is refused by flag name before
  anything runs.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator

import psycopg
import pytest

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.backends import BACKENDS
from tests.configs import write_config
from tests.hardening.test_command_errors import manage
from tests.integration import helpers

#: A seed long enough to interrupt (tens of seconds); it is stopped after its first batch.
LONG = ["seed_threads", "--threads", "50000", "--turns-max", "2", "--templates", "1", "--mode", "delta",
        "--seed", "long"]


@pytest.fixture
def target(request, tmp_path) -> Iterator[tuple[DatabaseConfig, dict[str, str]]]:
    """A new, empty checkpoint database of the test's ``backend`` and the environment of a command using it."""
    if request.param == "sqlite":
        database, name = DatabaseConfig(backend="sqlite", sqlite_dir=str(tmp_path / "data")), None
    else:
        name, url = fixtures_real.create_database("dfa_seed_cmd")
        database = DatabaseConfig(backend="postgres", postgres_url=url)
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    env = helpers.dashboard_env(config_path=write_config(tmp_path / "config.yaml", database), var_dir=var_dir)
    try:
        yield database, env
    finally:
        if name:
            fixtures_real.drop_database(name)


def _query(database: DatabaseConfig, sql: str) -> list[tuple]:
    if database.backend == "postgres":
        with psycopg.connect(database.postgres_url) as conn:
            return conn.execute(sql).fetchall()
    with sqlite3.connect(str(database.sqlite_path())) as conn:
        return conn.execute(sql).fetchall()


def _interrupt_after_first_batch(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``manage.py <args>``, send SIGINT once a progress line reports threads; (result, seconds it took then).

    The child starts with SIGINT ignored, as a background job of a non-interactive shell does (CI, ``&``):
    the command must install its own handler, so the test passes however the suite itself was started.
    """
    proc = subprocess.Popen([helpers.PYTHON, "manage.py", *args], cwd=helpers.REPO_ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if re.match(r"\s+\d+ threads, \d+ checkpoints", line):
                break
        proc.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(seen) + out, err), \
        time.monotonic() - interrupted


@pytest.mark.parametrize("target", BACKENDS, indirect=True)
def test_ctrl_c_keeps_whole_batches_and_says_to_change_the_seed(target):
    database, env = target
    helpers.run_manage(["seed_threads", "--threads", "5", "--turns-max", "2", "--templates", "1", "--seed", "first"],
                       env)  # builds the summary: batches from now on write their threads' rows too
    proc, seconds = _interrupt_after_first_batch(LONG, env)
    where = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 130, where
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, where
    found = re.search(r"CommandError: Interrupted: ([\d,]+) threads \(([\d,]+) checkpoints\) in (\d+) whole batch(es)? "
                      r"were committed to (SQLite file|Postgres database) .* with their thread summary rows; nothing "
                      r"else was written\.\nWhat to do: the committed threads stay\. To write more, run the command "
                      r"again with a different --seed \(this seed's thread ids now exist, so it is refused\)\.",
                      proc.stderr)
    assert found, where
    threads, checkpoints, batches = (int(found.group(i).replace(",", "")) for i in (1, 2, 3))
    assert 1 <= batches and threads == 1000 * batches < 50_000 and seconds < 30, where
    (seeded, rows), = _query(database, "SELECT COUNT(DISTINCT thread_id), COUNT(*) FROM checkpoints")
    summary = _query(database, "SELECT COUNT(*), SUM(checkpoint_count) FROM dfa_thread_summary")[0]
    assert seeded == 5 + threads and summary == (seeded, rows), where
    again = manage(LONG, env)
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr
    assert re.search(r"CommandError: thread [0-9a-f-]{36} already exists in .*: use another --seed", again.stderr)
    assert _query(database, "SELECT COUNT(*) FROM checkpoints") == [(rows,)]


@pytest.mark.parametrize("target", BACKENDS, indirect=True)
def test_the_loaded_tables_are_analyzed_so_the_freshness_count_uses_the_index(target):
    database, env = target
    proc = helpers.run_manage(["seed_threads", "--threads", "300", "--turns-max", "4", "--templates", "4",
                               "--seed", "stats"], env)
    assert "tables analyzed in" in proc.stdout
    tables = {"checkpoints", "dfa_thread_summary", "dfa_thread_cadences"}
    if database.backend == "sqlite":
        assert {r[0] for r in _query(database, "SELECT tbl FROM sqlite_stat1")} >= tables | {"writes"}
        return
    analyzed = _query(database, "SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL")
    assert {r[0] for r in analyzed} >= tables | {"checkpoint_blobs", "checkpoint_writes"}
    (mark,), = _query(database, "SELECT watermark FROM dfa_summary_state")
    # deerflow.inventory.summary.refresh.freshness, on every list request;
    # the index is dfa_checkpoints_checkpoint_id_idx.
    plan = "\n".join(r[0] for r in _query(database, "EXPLAIN SELECT COUNT(*) FROM (SELECT 1 FROM checkpoints WHERE "
                                                    f"checkpoint_id > '{mark}' LIMIT 2001) p"))
    assert "dfa_checkpoints_checkpoint_id_idx" in plan and "Seq Scan" not in plan, plan


def test_turns_min_above_turns_max_is_refused_by_flag_name_before_anything_runs(tmp_path):
    data = tmp_path / "data"
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(data)))
    (tmp_path / "var").mkdir()
    proc = manage(["seed_threads", "--threads", "3", "--turns-min", "5", "--turns-max", "3"],
                  helpers.dashboard_env(config_path=config, var_dir=tmp_path / "var"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "CommandError: --turns-min must not be greater than --turns-max; got --turns-min 5 and --turns-max 3" \
        in proc.stderr
    assert "turns_min" not in proc.stderr and proc.stdout == "" and not data.exists()


def test_interrupted_message_names_what_was_committed():
    from dashboard.threads.management.commands.seed_threads import interrupted_message
    from deerflow.seed import SeedReport

    nothing = interrupted_message(SeedReport(), "SQLite file x.db")
    assert nothing.startswith("Interrupted before any thread was committed to SQLite file x.db; nothing was written.")
    assert "the same --seed is fine" in nothing
    some = interrupted_message(SeedReport(threads=2000, checkpoints=17_000, batches=2), "SQLite file x.db")
    assert some.startswith("Interrupted: 2,000 threads (17,000 checkpoints) in 2 whole batches were committed to "
                           "SQLite file x.db; nothing else was written.\nWhat to do:")
    assert "with a different --seed" in some
