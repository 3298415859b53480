"""Job errors and the operator-facing texts of the jobs app (one place for hints).

::

    JobError                      an operator request about a job that cannot be honored (data, not a crash)
    ├── InvalidSelection          the selection names nothing valid (400)
    │   ├── SelectionTooLarge     more ids than a request may list (400; use a filter)
    │   ├── IdTooLong             an id longer than any real one (400)
    │   └── NotADryRun            a conversion's estimate job is not a finished dry run (400)
    ├── InvalidRetention          a prune job's rule, keep_last, protect or backup is bad (400)
    ├── RetentionMismatch         a prune's rule differs from the dry run it is confirmed from (400)
    ├── EstimateJobNotFound       the API's estimate_job names no job (400)
    ├── NothingToConvert          the selection resolved to no thread (400)
    ├── EstimateRequired          a conversion without a dry-run estimate and without confirmation (400)
    ├── SizeLimitExceeded         the estimate is above the size limit and was not confirmed (409)
    ├── ReadOnlyDatabase          the checkpoint database role may only read; a writing job cannot run (409)
    ├── NoLiveWorker              a Celery job launched while no live worker can run it (503)
    ├── LaunchDuringDrift         a job launched while config.yaml drifted under this process (503)
    └── InvalidTransition         pause/resume/cancel/retry/revert not possible in the job's state (409)
    TransientDatabaseError        a database hiccup worth retrying (Celery autoretries it)

Per-thread failures never raise: they are recorded on the ``ThreadResult``
row with ``error``, ``hint`` and ``error_code``.
"""

from __future__ import annotations

import sqlite3

import psycopg
from django.db.utils import OperationalError as DjangoOperationalError

from dashboard.errors.registry import ErrorView

__all__ = [
    "DELTA_WORKER_COMMAND",
    "EMPTY_LAUNCH_HINT",
    "EstimateJobNotFound",
    "EstimateRequired",
    "InvalidSelection",
    "IdTooLong",
    "InvalidRetention",
    "InvalidTransition",
    "JobError",
    "LaunchDuringDrift",
    "NoLiveWorker",
    "NotADryRun",
    "NothingToConvert",
    "ReadOnlyDatabase",
    "RetentionMismatch",
    "SelectionTooLarge",
    "SizeLimitExceeded",
    "SourceJobNotFound",
    "TransientDatabaseError",
    "UnknownThreads",
    "UNEXPECTED_ERROR_HINT",
    "WORKER_FULL_MODE_HINT",
    "is_transient",
]

#: How an operator starts a worker that can run conversions.
DELTA_WORKER_COMMAND = "celery -A dashboard worker -Q dashboard"

#: Recorded with the spec's 409 text when a full-mode process (a command run inline in a full-mode
#: process, or a worker started before workers froze delta) gets a thread that needs a delta reader.
WORKER_FULL_MODE_HINT = (
    "This process is frozen in full mode. Converting (or dry-running, or reverting) a delta thread reads "
    "its delta history, which only a delta-mode process may do. The dashboard's Celery workers always "
    "freeze delta mode whatever config.yaml's mode (they are maintenance processes) and consume the queue "
    f"checkpoints.delta: start one ({DELTA_WORKER_COMMAND}) with the deployment's config.yaml, "
    "then retry this job on it."
)

#: Recorded when a thread failed with an exception nobody anticipated.
UNEXPECTED_ERROR_HINT = (
    "Unexpected error; nothing was committed for this thread (each thread is one transaction). "
    "See the worker log for the traceback, then retry the job."
)


class JobError(Exception):
    """An operator request about a job that cannot be honored; carries its status, code and hint."""

    status = 400
    code = "job_error"
    hint = ""

    def __init__(self, detail: str, *, hint: str | None = None):
        super().__init__(detail)
        self.detail = detail
        if hint is not None:
            self.hint = hint

    def view(self) -> ErrorView:
        """The error as the pages and the API show it."""
        return ErrorView(status=self.status, code=self.code, detail=self.detail, hint=self.hint)


class InvalidSelection(JobError):
    """The selection is malformed or names backups/jobs that cannot be used."""

    code = "invalid_selection"
    hint = "Select threads by id, by filter (mode, class, updated before/after), or backups by id."


class SelectionTooLarge(InvalidSelection):
    """More ids in one selection than :data:`dashboard.jobs.selection.MAX_SELECTED_IDS`."""

    code = "selection_too_large"
    hint = ("Select many threads with a filter (mode, thread_class, q, updated_before/after) instead of "
            "listing their ids, or split the ids into several jobs.")


class IdTooLong(InvalidSelection):
    """A thread or backup id longer than :data:`dashboard.jobs.selection.MAX_ID_LENGTH` characters."""

    code = "id_too_long"
    hint = ("Check the ids: DeerFlow thread ids and backup ids are short; copy them from the thread list or the "
            "backups page.")


class UnknownThreads(InvalidSelection):
    """A request names thread ids the checkpoint database holds no checkpoint for (400, naming them)."""

    code = "unknown_threads"
    hint = ("Check the ids (copy them from the thread list): a thread exists once DeerFlow has stored a checkpoint "
            "for it. Remove the unknown ones and submit again.")


class NotADryRun(InvalidSelection):
    """A writing job names, as its estimate, a job that is not a finished dry run of its kind.

    The API words it for ``estimate_job``; :meth:`page_view` words it for the
    job page's "Convert" form (``POST /jobs/<id>/convert`` on such a job).
    """

    hint = ("Pass the id of a finished dry run of the job's kind (dry_run for convert, compact_dry_run for "
            "compact, prune_dry_run for prune) as estimate_job, or confirmed: true.")
    page_hint = ("Open the page of a finished dry run (listed on /jobs/), check its estimate, "
                 "and confirm the conversion there.")

    def __init__(self, job_id: int, kind: str = "convert", dry_run: str = "dry_run"):
        super().__init__(f"Job {job_id} is not a finished {dry_run} job; it cannot estimate a {kind} job.")
        self.job_id = job_id

    def page_view(self) -> ErrorView:
        """The error as the job pages show it."""
        return ErrorView(status=self.status, code=self.code, hint=self.page_hint,
                         detail=f"Job {self.job_id} is not a finished dry run; "
                                "start a conversion from a dry run's page.")


class InvalidRetention(JobError):
    """A prune job's retention rule is malformed (:func:`dashboard.jobs.pruning.normalize_retention`)."""

    code = "invalid_retention"
    hint = ("Give rule (keep_last, safe_only or delete_threads); keep_last: N (a whole number >= 1) with rule "
            "keep_last only; protect: a list of checkpoint ids; backup: true or false (docs/retention.md).")


class RetentionMismatch(JobError):
    """A prune confirmed from a dry run names another rule, N or protected set than the dry run previewed."""

    code = "retention_mismatch"
    hint = ("A prune deletes what its dry run previewed: leave rule, keep_last and protect out (they are taken "
            "from estimate_job), or run a new dry run with the rule you want.")


class EstimateJobNotFound(JobError):
    """``estimate_job`` (API) names no job."""

    code = "estimate_job_not_found"
    hint = ("Pass the id of a finished dry run of these threads as estimate_job (GET /api/jobs lists the jobs), "
            "or confirmed: true.")


class SourceJobNotFound(JobError):
    """A reclaim's ``source_job`` (API) names no job."""

    status = 404
    code = "source_job_not_found"
    hint = ("source_job is the compaction or prune the reclaim follows (GET /api/jobs lists the jobs); leave it out "
            "to reclaim without one.")


#: Said when "Convert to full" is launched with neither thread ids nor a filter.
EMPTY_LAUNCH_HINT = ("Convert one thread from its page, or filter the thread list (id contains, mode, class) and use "
                     "\"Convert matching threads to full…\"; to select every delta thread, choose Mode: delta.")


class NothingToConvert(JobError):
    """The selection resolved to no thread (for example, no thread needs conversion)."""

    code = "no_threads"
    hint = "Nothing to do: widen the filter, or check the thread ids."


class EstimateRequired(JobError):
    """A conversion was requested without a finished dry run to estimate it, and without confirmation."""

    code = "estimate_required"
    hint = ("Run a dry run first (kind dry_run) and launch the conversion from it (estimate_job), "
            "or confirm explicitly to convert without an estimate.")


class SizeLimitExceeded(JobError):
    """The dry run estimates more bytes after conversion than the size limit; confirm to go ahead."""

    status = 409
    code = "size_limit_exceeded"
    hint = ("Full mode stores the whole message list at every checkpoint. Check that the database has room, "
            "then confirm the size explicitly, or convert fewer threads at a time.")


class FullModeFleet(JobError):
    """A compaction was requested while live registered processes of the fleet run in full mode."""

    status = 409
    code = "full_mode_fleet"
    hint = ("A compacted thread is delta: full-mode processes answer 409 for it. Switch every process to "
            "database.checkpoint_channel_mode: delta and restart it, or override explicitly (force_full_fleet: true).")

class ReadOnlyDatabase(JobError):
    """The checkpoint database role (or SQLite file) may only be read; a writing job cannot run."""

    status = 409
    code = "checkpoint_database_read_only"
    hint = ("Run conversions from a process whose config.yaml connects as a role that may write: "
            "GRANT INSERT, UPDATE, DELETE ON checkpoints, checkpoint_blobs, checkpoint_writes TO <role>, "
            "and CREATE on the schema (or create the dfa_backup tables once as an owner). A dry run only reads "
            "and works as it is.")


class InvalidTransition(JobError):
    """The job's state does not allow this action (e.g. resume a job that is not paused)."""

    status = 409
    code = "invalid_transition"
    hint = "Reload the job page: its state changed, or the action does not apply to it."


class TransientDatabaseError(Exception):
    """A database hiccup (connection dropped, SQLite busy) worth retrying; the thread's transaction rolled back."""


def is_transient(exc: BaseException) -> bool:
    """True for the errors a retry can cure.

    ``psycopg.OperationalError`` (connection lost, server restarting) and
    SQLite's ``database is locked`` / ``busy``, raw or wrapped by Django.
    Other ``sqlite3.OperationalError`` values (no such table, disk I/O) are
    not retried.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, psycopg.OperationalError):
            return True
        if isinstance(exc, sqlite3.OperationalError | DjangoOperationalError):
            text = str(exc).lower()
            if "locked" in text or "busy" in text:
                return True
        cause = exc.__cause__ or exc.__context__
        if cause is None:
            return False
        exc = cause
    return False


class NoLiveWorker(JobError):
    """A Celery job was launched while no live worker consumes ``checkpoints.delta``: refused, never queued to
    wait silently (:mod:`dashboard.jobs.admission`); ``detail`` says why, ``hint`` the command that fixes it."""

    status = 503
    code = "no_live_worker"


class LaunchDuringDrift(JobError):
    """A job was launched while this process's config.yaml asks for another mode or cadence than it froze:
    refused with the thread pages' 503 code, detail and hint (:mod:`dashboard.jobs.admission`)."""

    status = 503
    code = "checkpoint_mode_reconfiguration"
