"""A thread's provenance for its page: the jobs that touched it and the backups its conversions wrote.

Read from the dashboard's own database (the ``ThreadResult`` rows), never from
the checkpoint database: a thread page stays a pure read there. Whether a
backup is still active is decided by the revert confirmation page.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections, router

from dashboard.jobs.models import ConversionJob, ThreadResult

__all__ = ["SHOWN", "revertible", "thread_jobs"]

#: Newest job results listed on a thread page.
SHOWN = 20


def thread_jobs(thread_id: str) -> list[ThreadResult]:
    """The newest :data:`SHOWN` results of jobs that selected ``thread_id`` (``result.job`` loaded), newest first.

    A result of a finished ``convert`` job with a ``backup_id`` is the conversion
    that backup can revert. Most threads were never selected by a job: one plain indexed probe answers
    those (``[]``) without building the ORM query (about 0.5 ms of compiling on every thread page).
    """
    if not _has_results(thread_id):
        return []
    return list(ThreadResult.objects.filter(thread_id=thread_id).select_related("job")
                .order_by("-job__created_at", "-job_id")[:SHOWN])


def _has_results(thread_id: str) -> bool:
    """Whether any job result names ``thread_id`` (the ``thread_id`` index, one row at most)."""
    connection = connections[router.db_for_read(ThreadResult) or DEFAULT_DB_ALIAS]
    q = connection.ops.quote_name
    column = q(str(ThreadResult._meta.get_field("thread_id").column))
    with connection.cursor() as cur:
        cur.execute(f"SELECT 1 FROM {q(ThreadResult._meta.db_table)} WHERE {column} = %s LIMIT 1", [thread_id])
        return cur.fetchone() is not None


def revertible(result: ThreadResult) -> bool:
    """``result`` is a conversion of its thread that wrote a backup (the revert page checks it is still active)."""
    return result.job.kind == ConversionJob.Kind.CONVERT and result.status == "converted" and bool(result.backup_id)
