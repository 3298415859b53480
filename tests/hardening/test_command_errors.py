"""Management commands report setup errors like the web pages: detail, hint, exit 1, no traceback.

Each case runs ``manage.py <command>`` in a new process with an
environment built from scratch (:func:`tests.integration.helpers.dashboard_env`),
as an operator would (forked from an interpreter that has the third-party libraries
imported, :mod:`tests.manage_forks`: a case costs a fraction of a cold start), against
real services: config.yaml files that are missing or invalid, a Postgres database
that does not exist, a closed port, a database without checkpoint tables, the memory
backend, an unmigrated dashboard database; for ``seed_threads``, which creates tables but not
databases, schemas or parent directories, a missing schema and a
``sqlite_dir`` in a directory that does not exist (answered in seconds,
not after a pool timeout). Every run must exit non-zero with ``CommandError: <detail>``
and a ``What to do: <hint>`` line on stderr (:mod:`dashboard.commands`), and
no traceback.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real, manage_forks
from tests.configs import write_config
from tests.integration import helpers

#: The commands that read the checkpoint database config.yaml names.
CHECKPOINT_COMMANDS = {
    "audit_modes": ["audit_modes"],
    "refresh_inventory": ["refresh_inventory"],
    "conversion_backups": ["conversion_backups"],
    "convert_threads": ["convert_threads", "--to", "full", "--all", "--dry-run"],
    "prune_threads": ["prune_threads", "--all", "--safe-only", "--dry-run"],
    "revert_prune": ["revert_prune", "no-such-backup"],
}
#: ``seed_threads`` with a small plan: it writes the checkpoint database, creating its tables.
SEED = ["seed_threads", "--threads", "3", "--turns-max", "2", "--templates", "1"]
#: Commands that read config.yaml without opening the runtime's saver.
CONFIG_COMMANDS = {**CHECKPOINT_COMMANDS, "load_demo_data": ["load_demo_data"], "seed_threads": SEED}
#: Commands that use the dashboard's own database.
DASHBOARD_DB_COMMANDS = {
    "audit_modes": ["audit_modes"],
    "convert_threads": ["convert_threads", "--to", "full", "--all", "--dry-run"],
    "create_api_token": ["create_api_token", "someone"],
    "ensure_demo_admin": ["ensure_demo_admin"],
    "requeue_stalled_threads": ["requeue_stalled_threads", "--dry-run"],
}

#: case: (config.yaml text or None for a missing file, text stderr must contain)
CONFIG_CASES = {
    "missing": (None, "config file not found"),
    "bad_yaml": ("database: [backend: sqlite\n", "config file is not valid YAML at line"),
    "bad_mode": ("database:\n  backend: sqlite\n  sqlite_dir: {data}\n  checkpoint_channel_mode: sideways\n",
                 "database.checkpoint_channel_mode: Input should be 'full' or 'delta'"),
    "unset_var": ("database:\n  backend: postgres\n  postgres_url: $DFA_CMD_ERRORS_UNSET_URL\n",
                  "environment variable DFA_CMD_ERRORS_UNSET_URL is not set"),
}


def manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python manage.py <args>`` to completion (whatever its exit status), in a fresh forked process."""
    return manage_forks.run_manage(args, env, helpers.REPO_ROOT)


def migrate(args: list[str], env: dict[str, str]) -> None:
    """``manage.py migrate ...`` (forked like :func:`manage`); raise with its output unless it exits 0."""
    proc = manage(args, env)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def assert_clean_error(proc: subprocess.CompletedProcess, *details: str, returncode: int = 1) -> None:
    """Exit ``returncode``; stderr holds ``CommandError: ``, every detail and a hint line; no traceback."""
    where = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == returncode, where
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, where
    assert "CommandError: " in proc.stderr, where
    assert "\nWhat to do: " in proc.stderr, where
    for detail in details:
        assert detail in proc.stderr, where


def _env(tmp_path: Path, config: Path, **extra: str) -> dict[str, str]:
    var_dir = tmp_path / "var"
    var_dir.mkdir(exist_ok=True)
    env = helpers.dashboard_env(config_path=config, var_dir=var_dir, **extra)
    env.pop("DFA_CMD_ERRORS_UNSET_URL", None)
    return env


@pytest.fixture(scope="module")
def fixture_data(tmp_path_factory) -> Path:
    """A folder holding a copy of the real fixture's ``deerflow.db``."""
    data = tmp_path_factory.mktemp("data")
    fixtures_real.restore_sqlite(data)
    return data


@pytest.fixture(scope="module")
def empty_database() -> Iterator[str]:
    """The URL of a new Postgres database without any table."""
    name, url = fixtures_real.create_database("dfa_cmd_errors")
    try:
        yield url
    finally:
        fixtures_real.drop_database(name)


# -- config.yaml -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
@pytest.mark.parametrize("command", sorted(CONFIG_COMMANDS))
def test_a_bad_config_file_is_one_clean_message(tmp_path, case, command):
    text, expected = CONFIG_CASES[case]
    config = tmp_path / "config.yaml"
    if text is not None:
        config.write_text(text.format(data=tmp_path / "data"), encoding="utf-8")
    proc = manage(CONFIG_COMMANDS[command], _env(tmp_path, config))
    assert_clean_error(proc, str(config), expected, "What to do: Fix config.yaml")


@pytest.mark.parametrize("command", sorted(CHECKPOINT_COMMANDS))
def test_a_wrong_sqlite_dir_is_reported_and_no_file_is_created(tmp_path, command):
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(nowhere)))
    proc = manage(CHECKPOINT_COMMANDS[command], _env(tmp_path, config))
    assert_clean_error(proc, f"SQLite checkpoint file {nowhere / 'deerflow.db'} does not exist",
                       "database.sqlite_dir")
    assert list(nowhere.iterdir()) == []


@pytest.mark.parametrize("command", sorted(CHECKPOINT_COMMANDS))
def test_the_memory_backend_is_refused_in_one_sentence(tmp_path, command):
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="memory"))
    proc = manage(CHECKPOINT_COMMANDS[command], _env(tmp_path, config))
    assert_clean_error(proc, "This command needs the SQLite or Postgres backend",
                       f"{config} sets database.backend: memory")
    assert "TypeError" not in proc.stderr


def test_seed_threads_refuses_a_sqlite_dir_in_a_missing_directory(tmp_path):
    typo = tmp_path / "dta" / "data"
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(typo)))
    proc = manage(SEED, _env(tmp_path, config))
    assert_clean_error(proc, f"{config}: the parent directory {typo.parent} of database.sqlite_dir",
                       f"Fix database.sqlite_dir (a typo?), or create {typo.parent} first")
    assert not typo.parent.exists() and "Seeding" not in proc.stdout


def test_seed_threads_refuses_the_memory_backend(tmp_path):
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="memory"))
    proc = manage(SEED, _env(tmp_path, config))
    assert_clean_error(proc, "This command needs the SQLite or Postgres backend",
                       f"{config} sets database.backend: memory")


# -- PostgreSQL ------------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("command", sorted(CHECKPOINT_COMMANDS))
def test_a_postgres_database_that_does_not_exist(tmp_path, command):
    name = f"dfa_no_such_db_{uuid.uuid4().hex[:10]}"
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="postgres", postgres_url=url))
    proc = manage(CHECKPOINT_COMMANDS[command], _env(tmp_path, config))
    assert_clean_error(proc, f"database.postgres_url in {config}", f'database "{name}" does not exist',
                       "PostgreSQL at 127.0.0.1:5432 answers")
    assert "PoolTimeout" not in proc.stderr


@pytest.mark.postgres
@pytest.mark.parametrize("command", sorted(CHECKPOINT_COMMANDS))
def test_postgres_on_a_closed_port(tmp_path, command):
    url = "postgresql://postgres@127.0.0.1:1/deerflow"
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="postgres", postgres_url=url))
    proc = manage(CHECKPOINT_COMMANDS[command], _env(tmp_path, config))
    assert_clean_error(proc, f"database.postgres_url in {config}",
                       "PostgreSQL at 127.0.0.1:1 is unreachable: Connection refused")


@pytest.mark.postgres
@pytest.mark.parametrize("command", sorted(CHECKPOINT_COMMANDS))
def test_a_postgres_database_without_checkpoint_tables(tmp_path, empty_database, command):
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="postgres", postgres_url=empty_database))
    proc = manage(CHECKPOINT_COMMANDS[command], _env(tmp_path, config))
    assert_clean_error(proc, "has no LangGraph checkpoint tables", 'relation "checkpoints" does not exist',
                       f"Point database.postgres_url in {config}")


def _timed_manage(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = manage(args, env)
    return proc, time.monotonic() - started


@pytest.mark.postgres
def test_seed_threads_into_a_postgres_database_that_does_not_exist(tmp_path):
    name = f"dfa_no_such_db_{uuid.uuid4().hex[:10]}"
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="postgres", postgres_url=url))
    proc, seconds = _timed_manage(SEED, _env(tmp_path, config))
    assert_clean_error(proc, f"database.postgres_url in {config}", f'PostgreSQL at 127.0.0.1:5432 answers, but '
                       f'database "{name}" does not exist: the seeder creates LangGraph\'s tables, not the database',
                       f'Create it (CREATE DATABASE "{name}";')
    assert "PoolTimeout" not in proc.stderr and "Seeding" not in proc.stdout
    assert seconds < 15, seconds  # not the pool's 30 s timeout


@pytest.mark.postgres
def test_seed_threads_into_postgres_on_a_closed_port(tmp_path):
    url = "postgresql://postgres@127.0.0.1:1/deerflow"
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="postgres", postgres_url=url))
    proc, seconds = _timed_manage(SEED, _env(tmp_path, config))
    assert_clean_error(proc, f"database.postgres_url in {config}",
                       "PostgreSQL at 127.0.0.1:1 is unreachable: Connection refused")
    assert "PoolTimeout" not in proc.stderr and "ServerUnreachable" not in proc.stderr
    assert seconds < 15, seconds


@pytest.mark.postgres
def test_seed_threads_into_a_postgres_schema_that_does_not_exist(tmp_path):
    name, url = fixtures_real.create_database("dfa_cmd_schema")
    try:
        config = tmp_path / "config.yaml"
        config.write_text(f"database:\n  backend: postgres\n  postgres_url: {url}\n  postgres_schema: dfa_nosuch\n",
                          encoding="utf-8")
        proc, seconds = _timed_manage(SEED, _env(tmp_path, config))
        assert_clean_error(proc, f"{config}: database.postgres_schema names schema 'dfa_nosuch', which does not "
                           f"exist in database {name} on 127.0.0.1:5432",
                           "Create it (CREATE SCHEMA dfa_nosuch;) or fix database.postgres_schema")
        assert "InvalidSchemaName" not in proc.stderr and seconds < 15, seconds
        with psycopg.connect(url) as conn:  # nothing was created, not even a template's scratch schema
            assert conn.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname NOT IN "
                                "('pg_catalog', 'information_schema')").fetchone() == (0,)
            assert conn.execute("SELECT COUNT(*) FROM pg_namespace WHERE nspname LIKE 'dfa_%'").fetchone() == (0,)
    finally:
        fixtures_real.drop_database(name)


@pytest.mark.postgres
def test_run_benchmarks_with_an_unreachable_admin_url(tmp_path):
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="memory"))
    proc = manage(["run_benchmarks", "--scale", "small", "--only", "list",
                   "--pg-admin-url", "postgresql://postgres@127.0.0.1:1/postgres"], _env(tmp_path, config))
    assert_clean_error(proc, "--pg-admin-url postgresql://postgres@127.0.0.1:1/postgres", "Connection refused")


# -- the dashboard's own database ------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(DASHBOARD_DB_COMMANDS))
def test_an_unmigrated_dashboard_database(tmp_path, fixture_data, command):
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(fixture_data)))
    proc = manage(DASHBOARD_DB_COMMANDS[command], _env(tmp_path, config))
    assert_clean_error(proc, "The dashboard's own database (DASHBOARD_DATABASE_URL", "no such table",
                       "Run `python manage.py migrate`")


@pytest.mark.parametrize("command", sorted(DASHBOARD_DB_COMMANDS))
def test_an_unmigrated_dashboard_database_on_postgres(tmp_path, fixture_data, empty_database, command):
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(fixture_data)))
    proc = manage(DASHBOARD_DB_COMMANDS[command],
                  _env(tmp_path, config, DASHBOARD_DATABASE_URL=empty_database))
    assert_clean_error(proc, "The dashboard's own database (DASHBOARD_DATABASE_URL", "PostgreSQL at 127.0.0.1:5432",
                       "does not exist", "Run `python manage.py migrate`")


def test_a_partly_migrated_dashboard_database_on_postgres(tmp_path, fixture_data):
    """The jobs app at 0001 lacks ``ThreadResult.queued_at`` (0002): a missing column also says to migrate."""
    name, url = fixtures_real.create_database("dfa_cmd_partial")
    try:
        config = write_config(tmp_path / "config.yaml",
                              DatabaseConfig(backend="sqlite", sqlite_dir=str(fixture_data)))
        env = _env(tmp_path, config, DASHBOARD_DATABASE_URL=url)
        migrate(["migrate", "--verbosity", "0"], env)
        migrate(["migrate", "jobs", "0001", "--verbosity", "0"], env)
        proc = manage(["requeue_stalled_threads", "--dry-run"], env)
        assert_clean_error(proc, "The dashboard's own database (DASHBOARD_DATABASE_URL", "queued_at",
                           "does not exist", "Run `python manage.py migrate`")
    finally:
        fixtures_real.drop_database(name)


# -- convert_threads in a full-mode process --------------------------------------------------------


def test_convert_threads_in_full_mode_stops_before_creating_a_job(tmp_path, fixture_data):
    config = write_config(tmp_path / "config.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(fixture_data)),
                          mode="full")
    env = _env(tmp_path, config)
    migrate(["migrate", "--verbosity", "0"], env)
    for args in (["--all"], ["--thread", "delta-f10-9t", "--yes"]):
        proc = manage(["convert_threads", "--to", "full", *args], env)
        assert_clean_error(proc, "froze checkpoint_channel_mode=full", str(config), "no job was created",
                           "DEER_FLOW_CONFIG_PATH pointing at a delta-mode config.yaml",
                           "database.checkpoint_channel_mode: delta", returncode=2)
        assert "refused" not in proc.stdout and "Celery" not in proc.stderr
    with sqlite3.connect(tmp_path / "var" / "dash.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM jobs_conversionjob").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM jobs_threadresult").fetchone() == (0,)
