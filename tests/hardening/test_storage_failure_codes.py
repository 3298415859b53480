"""Storage failures keep their code and hint wherever they surface: a job's thread, a page, the API.

The driver errors are real: SQLite's "attempt to write a readonly database" from a file opened
read-only, Postgres' ReadOnlySqlTransaction from a read-only transaction, and SQLite's own
``OperationalError`` class with its "disk I/O error" words (a failing disk cannot be made on demand).
Each is raised raw (as LangGraph's saver raises it) and translated (as ``deerflow``'s own SQL raises it,
:func:`deerflow.storage.storage_error`), mid-job (the thread's row records the code and hint, not
``unexpected_error``) and on ``/api/threads`` (503 with the same code and hint).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from dashboard.errors.outages import DISK_IO_HINT, READ_ONLY_HINT, describe_storage_failure
from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from deerflow.storage import storage_error
from tests.dashboard.jobs.conftest import DELTA_SMALL, delta_rt, small_db  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def _raised(fn) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the error is what the test is about
        return exc
    raise AssertionError("nothing was raised")


def _sqlite_read_only(tmp_path: Path) -> sqlite3.OperationalError:
    path = tmp_path / "ro.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        exc = _raised(lambda: conn.execute("INSERT INTO t VALUES (1)"))
    finally:
        conn.close()
    assert isinstance(exc, sqlite3.OperationalError) and "readonly database" in str(exc)
    return exc


def _postgres_read_only(database) -> psycopg.Error:
    with psycopg.connect(database.postgres_url) as conn:
        conn.execute("SET default_transaction_read_only = on")
        conn.commit()
        exc = _raised(lambda: conn.execute("CREATE TABLE dfa_probe (x int)"))
    assert isinstance(exc, psycopg.errors.ReadOnlySqlTransaction)
    return exc


def _disk_io() -> sqlite3.OperationalError:
    return sqlite3.OperationalError("disk I/O error")


def _translated(exc: BaseException) -> BaseException:
    try:
        raise storage_error(exc) from exc
    except BaseException as translated:  # noqa: BLE001
        return translated


@pytest.fixture(params=["sqlite-read-only", "postgres-read-only", "sqlite-disk-io"])
def failure(request, tmp_path) -> tuple[BaseException, str, str]:
    """``(a real driver error, its code, its hint)``."""
    if request.param == "sqlite-read-only":
        return _sqlite_read_only(tmp_path), "checkpoint_database_read_only", READ_ONLY_HINT
    if request.param == "postgres-read-only":
        database = request.getfixturevalue("empty_postgres_db")
        return _postgres_read_only(database), "checkpoint_database_read_only", READ_ONLY_HINT
    return _disk_io(), "checkpoint_disk_io_error", DISK_IO_HINT


@pytest.mark.parametrize("translate", [False, True], ids=["raw", "translated"])
def test_a_storage_failure_mid_job_records_its_code_and_hint(delta_rt, failure, translate, monkeypatch):  # noqa: F811
    error, code, hint = failure
    raised = _translated(error) if translate else error

    def failing(*args, **kwargs):
        raise raised

    monkeypatch.setattr("deerflow.convert.convert_thread", failing)
    job = services.create_job(None, ConversionJob.Kind.CONVERT, {"thread_ids": DELTA_SMALL[:1]},
                              services.JobOptions(confirmed=True, launched_by="test"))
    services.claim_batch(job.pk)
    row = job.results.get()
    services.run_thread(row.pk)
    row.refresh_from_db()
    assert (row.status, row.error_code, row.hint) == ("error", code, hint)
    assert str(error).splitlines()[0].rstrip(".") in row.error


def test_the_api_answers_the_same_code_and_hint_as_the_job(delta_rt, failure, staff_client, monkeypatch):  # noqa: F811
    error, code, hint = failure

    def failing(*args, **kwargs):
        raise _translated(error)

    monkeypatch.setattr("dashboard.threads.services.list_threads", failing)
    response = staff_client.get("/api/threads")
    assert response.status_code == 503, response.content[:300]
    assert (response.json()["code"], response.json()["hint"]) == (code, hint)


def test_errors_that_are_not_the_checkpoint_databases_are_not_storage_failures():
    assert describe_storage_failure(RuntimeError("boom")) is None
    assert describe_storage_failure(sqlite3.OperationalError("no such column: x")) is None  # a bug, not storage
