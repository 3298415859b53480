"""Reclaim jobs: give the space a compaction or a purge freed back to the disk.

A ``reclaim`` job runs :func:`deerflow.convert.reclaim.reclaim_space` once on
the checkpoint database: SQLite ``VACUUM`` (then a WAL truncate), Postgres
``VACUUM (ANALYZE)`` of LangGraph's three tables, or ``VACUUM (FULL, ANALYZE)``
only when asked. It goes through the same machinery as every job (one work
row, claimed by a worker, pause / cancel / progress), its one row standing for
the database (``thread_id`` ``""``); the sizes before and after are recorded
on the job (:attr:`ConversionJob.reclaim`) and the row (``bytes_before``,
``bytes_after``).
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from dashboard.errors.jobs import InvalidSelection
from dashboard.jobs.admission import admit_launch
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.writable import check_can_write
from dashboard.runtime import DashboardRuntime, get_runtime
from deerflow import convert
from deerflow.convert import LANGGRAPH_TABLES, database_sizes, reclaim_space
from deerflow.storage import sqlite_checkpoint_path

__all__ = ["DATABASE_ROW", "RECLAIMED", "ReclaimPlan", "create_reclaim_job", "plan", "run_one"]

#: The ``thread_id`` of a reclaim job's one row: the whole checkpoint database, no thread.
DATABASE_ROW = ""
#: The row status of a reclaim that ran.
RECLAIMED = "reclaimed"
#: The jobs after which the pages offer a reclaim (their backups, once purged, leave free pages).
OFFERED_AFTER = (ConversionJob.Kind.COMPACT, ConversionJob.Kind.PRUNE)

NO_DISK_HINT = ("SQLite's VACUUM writes a complete copy of the database before replacing it: it needs free disk "
                "about the size of the file. Free that much space next to the file, then retry; nothing was lost "
                "(VACUUM is atomic).")
LOCKED_HINT = ("Another connection held the database's write lock for longer than the 60 s busy timeout. "
               "Retry when DeerFlow is quiet; nothing was changed.")


@dataclass(frozen=True)
class ReclaimPlan:
    """What a reclaim would do, for the confirmation page.

    Attributes:
        backend: ``sqlite`` or ``postgres``.
        statement: ``VACUUM``, ``VACUUM (ANALYZE)`` or ``VACUUM (FULL, ANALYZE)``.
        sizes: :func:`deerflow.convert.reclaim.database_sizes` now (bytes).
        total: their sum (bytes).
        disk_free: SQLite: free bytes on the file's filesystem now (``None`` for Postgres).
        enough_disk: SQLite: ``disk_free`` covers the file (VACUUM writes a whole copy); always true for Postgres.
        active_backups: backups still active of the job the reclaim follows (their rows keep the space).
        tables: the tables a Postgres reclaim vacuums.
    """

    backend: str
    statement: str
    sizes: dict[str, int]
    total: int
    disk_free: int | None
    enough_disk: bool
    active_backups: int
    tables: tuple[str, ...] = LANGGRAPH_TABLES


def plan(rt: DashboardRuntime, *, full: bool = False, active_backups: int = 0) -> ReclaimPlan:
    """The :class:`ReclaimPlan` of a reclaim now (reads sizes; writes nothing); ``active_backups``: the backups
    still active of the job the reclaim follows (:func:`dashboard.jobs.services.active_backups`), shown on the page.

    Raises:
        ValueError: the memory backend. FileNotFoundError: no SQLite file. psycopg.Error: Postgres unreachable.
    """
    database = rt.config.database
    sizes = database_sizes(database)
    total = sum(sizes.values())
    backups = active_backups
    if database.backend == "sqlite":
        free = shutil.disk_usage(sqlite_checkpoint_path(database).parent).free
        return ReclaimPlan("sqlite", "VACUUM", sizes, total, free, free >= sizes["file"], backups)
    statement = "VACUUM (FULL, ANALYZE)" if full else "VACUUM (ANALYZE)"
    return ReclaimPlan("postgres", statement, sizes, total, None, True, backups)


def create_reclaim_job(user: Any, *, full: bool = False, source_job: ConversionJob | None = None,
                       runner: str = "celery", launched_by: str = "") -> ConversionJob:
    """Create a ``reclaim`` job and its one pending row (start it with :func:`dashboard.jobs.services.launch`).

    Args:
        user: the launching user (``None`` for the command line; then give ``launched_by``).
        full: Postgres ``VACUUM (FULL, ANALYZE)`` (an ACCESS EXCLUSIVE lock per table while it runs).
        source_job: the compaction or prune the reclaim follows (shown on both pages), or ``None``.

    Raises:
        InvalidSelection: ``full`` on SQLite, or the memory backend.
        ReadOnlyDatabase: this process may only read the checkpoint database.
        NoLiveWorker, LaunchDuringDrift: see :func:`dashboard.jobs.admission.admit_launch`.
    """
    admit_launch(runner)
    database = get_runtime().config.database
    if database.backend not in ("sqlite", "postgres"):
        raise InvalidSelection("Reclaiming space needs a persistent checkpoint database (sqlite or postgres).")
    if full and database.backend != "postgres":
        raise InvalidSelection("VACUUM FULL is for Postgres: SQLite's VACUUM always rebuilds the whole file.",
                               hint="Leave 'VACUUM FULL' unticked on SQLite.")
    check_can_write(database)
    with transaction.atomic():
        job = ConversionJob.objects.create(
            kind=ConversionJob.Kind.RECLAIM, selection={"database": database.backend}, source_job=source_job,
            created_by=user, launched_by=launched_by or getattr(user, "username", ""), runner=runner,
            reclaim={"full": full})
        ThreadResult.objects.create(job=job, thread_id=DATABASE_ROW)
    return job


def run_one(rt: DashboardRuntime, job: ConversionJob) -> convert.ThreadReport:
    """Vacuum the checkpoint database; record the :class:`~deerflow.convert.reclaim.ReclaimReport` on ``job``.

    Returns the row's report: status :data:`RECLAIMED` with the total bytes before and after, or ``error``
    with a hint (no disk space for SQLite's copy; bad backend). A locked SQLite file raises (transient: retried).
    """
    full = bool(job.reclaim.get("full"))
    try:
        report = reclaim_space(rt.config.database, full=full)
    except sqlite3.OperationalError as exc:
        if "full" not in str(exc).lower():
            raise  # "database is locked": transient, the task retries it
        return convert.ThreadReport(thread_id=DATABASE_ROW, status=ThreadResult.ERROR, error=str(exc),
                                    hint=NO_DISK_HINT)
    except (ValueError, FileNotFoundError) as exc:
        return convert.ThreadReport(thread_id=DATABASE_ROW, status=ThreadResult.ERROR, error=str(exc),
                                    hint="Reclaim needs the SQLite file or the Postgres database DeerFlow writes.")
    ConversionJob.objects.filter(pk=job.pk).update(reclaim={"full": full, **report.as_dict()})
    return convert.ThreadReport(thread_id=DATABASE_ROW, status=RECLAIMED, bytes_before=report.bytes_before,
                                bytes_after=report.bytes_after, duration_s=report.duration_s)
