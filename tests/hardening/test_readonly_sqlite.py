"""A SQLite checkpoint file this process may read but not write.

Operators browse a copy handed to them, a file on a read-only mount, or
DeerFlow's own file from a dashboard running as another user. The file and
its directory are made read-only and the dashboard process really lacks
write access: run as root, it runs without the capability to override file
permissions (``setpriv --bounding-set=-dac_override,-dac_read_search``).

* A rollback-journal file (a copy, a backup): every browsing route answers
  exactly what a process with write access answers for the same data.
* A WAL file with DeerFlow still running (its ``-wal`` and ``-shm`` files
  exist): the same.
* A WAL file with no process holding it open and a directory this process
  may not write: SQLite cannot create the ``-shm`` file a WAL reader needs,
  so nothing can be read. The API answers 503 saying so and what to do, not
  "check that the file exists".
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.config.database_config import DatabaseConfig
from tests import fixtures_real
from tests.configs import write_config
from tests.integration import helpers

THREADS = ["delta-f10-9t", "markerless-delta-f10-13t", "migrated-full20-delta20", "full-short-3t"]
ROUTES = ["/api/threads?limit=1000", "/api/threads?mode=delta&limit=5",
          *(f"/api/threads/{t}/state" for t in THREADS), *(f"/api/threads/{t}/history?limit=30" for t in THREADS)]
#: As root: the reading process may not override file permissions, so it obeys the read-only modes set here.
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]

#: Run in the reading process: answers of the API routes in argv, as JSON.
READER = """
import json, sys
import django
django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
call_command("migrate", verbosity=0)
client = Client()
client.force_login(User.objects.create_user("reader", is_staff=True))
answers = {}
for url in sys.argv[1:]:
    response = client.get(url)
    answers[url] = [response.status_code, response.json()]
print(json.dumps(answers))
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path``, its read-only directories made writable again afterwards (so it can be removed)."""
    yield tmp_path
    for sub in tmp_path.iterdir():
        if sub.is_dir():
            sub.chmod(0o755)


def _as_reader() -> list[str]:
    """argv prefix that leaves a process unable to write what is read-only (:data:`WITHOUT_OVERRIDE` as root)."""
    return WITHOUT_OVERRIDE if os.geteuid() == 0 else []


def _data(home: Path, name: str, *, wal: bool) -> Path:
    """A copy of the fixture file in ``home/name`` (WAL mode when ``wal``), made read-only; returns the dir."""
    directory = home / name
    fixtures_real.restore_sqlite(directory)
    if wal:
        with sqlite3.connect(directory / "deerflow.db") as conn:
            assert conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        conn.close()
    (directory / "deerflow.db").chmod(0o444)
    directory.chmod(0o555)
    return directory


def _answers(home: Path, data: Path, *, reader: bool) -> dict[str, list]:
    """The API's answers to :data:`ROUTES` from a process reading ``data`` (as a reader, or with write access)."""
    tag = f"{data.name}-{'reader' if reader else 'writer'}"
    var = home / f"var-{tag}"
    var.mkdir()
    config = write_config(home / f"config-{tag}.yaml", DatabaseConfig(backend="sqlite", sqlite_dir=str(data)))
    env = helpers.dashboard_env(config_path=config, var_dir=var, DJANGO_ALLOWED_HOSTS="testserver")
    argv = [*(_as_reader() if reader else []), helpers.PYTHON, "-c", READER, *ROUTES]
    proc = subprocess.run(argv, cwd=helpers.REPO_ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _writable_answers(home: Path) -> dict[str, list]:
    directory = home / "writable"
    fixtures_real.restore_sqlite(directory)
    return _answers(home, directory, reader=False)


def test_the_reader_really_cannot_write(home):
    data = _data(home, "probe", wal=False)
    script = ("import sqlite3, sys\n"
              "try:\n    open(sys.argv[1] + '/new', 'w')\nexcept PermissionError:\n    print('no new file')\n"
              "conn = sqlite3.connect(sys.argv[1] + '/deerflow.db')\n"
              "try:\n    conn.execute('DELETE FROM checkpoints')\nexcept sqlite3.OperationalError as exc:\n"
              "    print(exc)\n")
    proc = subprocess.run([*_as_reader(), helpers.PYTHON, "-c", script, str(data)], capture_output=True, text=True)
    assert proc.stdout.splitlines() == ["no new file", "attempt to write a readonly database"], proc.stderr


def test_a_read_only_copy_browses_like_a_writable_one(home):
    expected = _writable_answers(home)
    assert all(status == 200 for status, _ in expected.values()), expected
    data = _data(home, "copy", wal=False)
    assert _answers(home, data, reader=True) == expected
    assert sorted(p.name for p in data.iterdir()) == ["deerflow.db"]  # nothing was written next to it


def test_a_live_wal_file_browses_like_a_writable_one(home):
    expected = _writable_answers(home)
    data = _data(home, "live", wal=True)
    deerflow = sqlite3.connect(data / "deerflow.db")  # DeerFlow holding the file: its -wal and -shm exist
    try:
        deerflow.execute("SELECT COUNT(*) FROM checkpoints").fetchone()
        assert (data / "deerflow.db-shm").exists()
        assert _answers(home, data, reader=True) == expected
    finally:
        deerflow.close()


def test_a_closed_wal_file_in_a_read_only_directory_says_what_to_do(home):
    data = _data(home, "closed", wal=True)
    assert not (data / "deerflow.db-shm").exists()
    answers = _answers(home, data, reader=True)
    status, body = answers["/api/threads/delta-f10-9t/state"]
    assert status == 503, body
    assert body["code"] == "checkpoint_database_read_only"
    assert body["detail"] == (f"The SQLite checkpoint file {data / 'deerflow.db'} cannot be read: "
                              "attempt to write a readonly database.")
    assert body["hint"] == (
        f"The file is in WAL mode and this process may not write to {data}: a WAL reader must create "
        "deerflow.db-shm there while no other process has the file open. Let this process's user write "
        "to that directory (DeerFlow's own user does), or browse a copy (sqlite3 deerflow.db "
        "\"VACUUM INTO 'copy.db'\" makes one in rollback-journal mode, which a read-only process can open).")
