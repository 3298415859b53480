"""``python manage.py seed_threads`` as an operator runs it: a subprocess, real SQLite and Postgres databases.

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
from tests.configs import write_config
from tests.hardening.test_command_errors import manage
from tests.integration import helpers

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
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
    """Run ``manage.py <args>``, send SIGINT once a progress line reports threads; (result, seconds it took then)."""
    proc = subprocess.Popen([helpers.PYTHON, "manage.py", *args], cwd=helpers.REPO_ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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

