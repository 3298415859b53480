"""PostgreSQL drops the conversion's connection mid-job: the thread is untouched, the job says so, a retry converts.

The shared PostgreSQL server serves other suites, so it is not restarted;
instead, at the worst moment (every row rewritten and verified, the
transaction not yet committed: the converter's ``before_commit`` hook) an
administrator connection ends the conversion's session with
``pg_terminate_backend``, which is what a server restart does to it. The job
runs through :func:`dashboard.jobs.services.run_inline` (the code path of the
Celery task, with its retry policy: three attempts), and every attempt is cut.
"""

from __future__ import annotations

import psycopg
import pytest

from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.services import JobOptions
from deerflow import convert
from tests import fixtures_real

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREAD = "delta-f10-9t"


def rows(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return [
            *conn.execute("SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint::text, "
                          "metadata::text FROM checkpoints WHERE thread_id = %s ORDER BY 1, 2", (THREAD,)).fetchall(),
            *conn.execute("SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
                          "WHERE thread_id = %s ORDER BY 1, 2, 3", (THREAD,)).fetchall(),
            *conn.execute("SELECT checkpoint_ns, checkpoint_id, task_id, idx, blob FROM checkpoint_writes "
                          "WHERE thread_id = %s ORDER BY 1, 2, 3, 4", (THREAD,)).fetchall(),
        ]


def cut_connections(dbname: str) -> int:
    """End every session of ``dbname`` that is inside a transaction (the conversion's)."""
    with psycopg.connect(fixtures_real.PG_ADMIN_URL, autocommit=True) as conn:
        return len(conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
            "AND xact_start IS NOT NULL AND state <> 'active'", (dbname,)).fetchall())


def test_connection_cut_before_commit_then_retry(postgres_fixture_db_rw, runtime_for, monkeypatch):
    url = postgres_fixture_db_rw.postgres_url
    dbname = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    runtime_for(postgres_fixture_db_rw, "delta")
    original = rows(url)
    cuts: list[int] = []
    real_convert = convert.convert_thread

    def cut_before_commit(session) -> None:
        cuts.append(cut_connections(dbname))

    monkeypatch.setattr(convert, "convert_thread",
                        lambda *args, **kwargs: real_convert(*args, before_commit=cut_before_commit, **kwargs))
    job = services.create_job(None, ConversionJob.Kind.CONVERT, {"thread_ids": [THREAD]}, JobOptions(confirmed=True,
                              runner="inline", launched_by="test"))
    job = services.run_inline(job, sleep=lambda seconds: None)

    assert cuts == [1, 1, 1]  # three attempts (the task's retry policy), each cut before commit
    (result,) = job.results.all()
    assert job.state == ConversionJob.State.FAILED
    assert result.status == "error" and result.error_code == "task_failed"
    assert "terminating connection due to administrator command" in result.error
    assert "Retry the job" in result.hint
    assert rows(url) == original, "a cut conversion left rows behind"
    assert convert.list_backups(postgres_fixture_db_rw, THREAD) == []

    monkeypatch.setattr(convert, "convert_thread", real_convert)  # the server is back
    retry = services.retry(job, None)
    retry.runner = "inline"
    retry.save(update_fields=["runner"])
    retry = services.run_inline(retry, sleep=lambda seconds: None)
    assert retry.state == ConversionJob.State.SUCCEEDED
    assert retry.results.get().status == "converted"
    assert rows(url) != original
