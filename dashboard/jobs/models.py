"""Conversion jobs and their per-thread results.

A :class:`ConversionJob` is one operator request (dry run, convert or
revert) over a set of threads; each thread gets one :class:`ThreadResult`
row, which is also the unit of work a worker claims. Progress is read from
those rows (no Celery result backend involved).

Result lifecycle::

    pending ──dispatch──▶ queued ──claim──▶ running ──▶ <outcome>
       ▲                    │                              (a ThreadReport status,
       └─────── pause ──────┘                               refused, or error)
    pending / queued ──cancel──▶ skipped
"""

from __future__ import annotations

from enum import StrEnum

from django.conf import settings
from django.db import models
from django.utils import timezone

from deerflow.convert import STATUSES as REPORT_STATUSES
from deerflow.retention import STATUSES as PRUNE_STATUSES

__all__ = ["ConversionJob", "Kind", "ResultStatus", "RetentionPolicy", "State", "ThreadResult"]


class ConversionJob(models.Model):
    """One dry run, conversion or revert over a selection of threads.

    Attributes:
        kind: ``dry_run`` (estimate + integrity check), ``convert`` (delta to full), ``revert``,
            ``compact_dry_run`` (compaction preview), ``compact`` (full to delta, :mod:`dashboard.jobs.compaction`),
            ``prune_dry_run`` (retention preview), ``prune`` (retention, :mod:`dashboard.jobs.pruning`) or
            ``reclaim`` (VACUUM the checkpoint database, :mod:`dashboard.jobs.reclaiming`).
        state: see :class:`State` (a filter selection starts ``resolving``, the others ``queued``); ``revision``
            is bumped on every state change and also serializes dispatchers (its UPDATE takes the row's write lock).
        selection: what was asked for, as JSON: ``{"thread_ids": [...]}``,
            ``{"filter": {"mode", "thread_class", "q", "updated_before", "updated_after"}}``
            or, for reverts, ``{"backup_ids": [...]}``; a reclaim: ``{"database": "sqlite" | "postgres"}``.
        estimate: totals of the dry run behind a conversion:
            ``{"threads", "checkpoints_to_rewrite", "bytes_before", "bytes_after"}`` (bytes), or ``{}``.
        source_job: the dry run a conversion was confirmed from, or the conversion a revert undoes.
        parent: the job a retry re-runs the failed threads of.
        throttle_delay_s: pause before each next thread task (seconds).
        max_in_flight: thread tasks (batches, :mod:`dashboard.jobs.batches`) queued or running at once (count):
            the most threads that run at once.
        size_limit_bytes: refuse a conversion whose estimated bytes after exceed this, unless ``confirmed``.
        confirmed: the operator accepted an estimate above the size limit.
        integrity: compare the one-pass materialization with LangGraph's reader before writing.
        acknowledge_branch_ambiguous: the operator accepted sibling forks whose writes are all stored under
            the branch point (``branch_ambiguous``): they are converted as LangGraph's reader reads them.
        launched_by: who launched it, as text (a username, or ``cli:<os user>``); survives user deletion.
        runner: ``celery`` (fanned out to workers) or ``inline`` (the management command).
        retention: prune kinds only, the rule as :func:`dashboard.jobs.pruning.normalize_retention` gives it:
            ``{"rule": "keep_last" | "safe_only" | "delete_threads", "keep_last": N | None,
            "protect": [checkpoint ids], "backup": bool, "max_delete_per_run": N | None}`` (the last: most
            threads the job prunes or deletes; the rest are skipped with ``error_code`` ``max_delete_per_run``);
            ``{}`` for other kinds.
        reclaim: reclaim jobs only: ``{"full": bool}`` asked, then once it ran the
            :class:`deerflow.convert.reclaim.ReclaimReport` (``backend``, ``statement``, ``sizes_before``,
            ``sizes_after`` per file or table, ``bytes_before``, ``bytes_after``, ``bytes_freed`` in bytes,
            ``duration_s``); ``{}`` for other kinds.
    """

    class Kind(models.TextChoices):
        DRY_RUN = "dry_run", "dry run"
        CONVERT = "convert", "convert to full"
        REVERT = "revert", "revert"
        COMPACT_DRY_RUN = "compact_dry_run", "compaction dry run"
        COMPACT = "compact", "compact to delta"
        PRUNE_DRY_RUN = "prune_dry_run", "prune dry run"
        PRUNE = "prune", "prune history"
        RECLAIM = "reclaim", "reclaim disk space"

    class State(models.TextChoices):
        #: A filter selection is being resolved into result rows by a worker (``jobs.dispatch``), not the request.
        RESOLVING = "resolving", "resolving its filter"
        QUEUED = "queued"
        RUNNING = "running"
        PAUSED = "paused"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        PARTIALLY_FAILED = "partially_failed", "partially failed"
        CANCELLING = "cancelling"
        CANCELLED = "cancelled"

    FINAL_STATES = (State.SUCCEEDED, State.FAILED, State.PARTIALLY_FAILED, State.CANCELLED)

    kind = models.CharField(max_length=16, choices=Kind.choices)
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED, db_index=True)
    revision = models.PositiveBigIntegerField(default=0)
    selection = models.JSONField(default=dict)
    estimate = models.JSONField(default=dict, blank=True)
    source_job = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="derived_jobs")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="conversion_jobs")
    launched_by = models.CharField(max_length=150, blank=True)
    runner = models.CharField(max_length=10, default="celery")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    throttle_delay_s = models.FloatField(default=0.0)
    max_in_flight = models.PositiveIntegerField(default=1)
    confirmed = models.BooleanField(default=False)
    size_limit_bytes = models.BigIntegerField(null=True, blank=True)
    integrity = models.BooleanField(default=True)
    retention = models.JSONField(default=dict, blank=True)
    reclaim = models.JSONField(default=dict, blank=True)
    acknowledge_branch_ambiguous = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [("manage_conversions", "Can launch, pause, cancel, retry and revert conversions, "
                                              "and purge backups"),
                       ("manage_retention", "Can launch, confirm, pause, cancel, retry and revert prune jobs "
                                            "(deleting checkpoint history) and edit retention policies")]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.kind}, {self.state})"

    @property
    def finished(self) -> bool:
        """The job reached a final state (nothing will run any more)."""
        return self.state in self.FINAL_STATES


#: The job kinds and states by their short names (``Kind.PRUNE``, ``State.RUNNING``).
Kind, State = ConversionJob.Kind, ConversionJob.State


class ResultStatus(StrEnum):
    """A result row's own lifecycle statuses (the report statuses come from ``deerflow.convert`` and
    ``deerflow.retention``); the values are the strings stored in ``ThreadResult.status``."""

    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    SKIPPED = "skipped"
    REFUSED = "refused"
    ERROR = "error"
    #: DeerFlow had a run pending or running on the thread (its ``runs`` table): not touched; retry later.
    RUN_IN_FLIGHT = "run_in_flight"


class ThreadResult(models.Model):
    """One thread of a job: the work item a worker claims, then the conversion report.

    Attributes:
        status: ``pending``, ``queued``, ``running``, ``skipped`` (cancelled before it ran),
            ``refused`` (the worker's frozen mode or config could not serve it; ``error_code``
            says which), ``error`` (unexpected exception, as text), or a
            :data:`deerflow.convert.STATUSES` value, or ``reclaimed`` (a reclaim job's row, whose
            ``thread_id`` is ``""``: the whole database).
        checkpoints_total / checkpoints_rewritten: counts from the report.
        bytes_before / bytes_after: stored bytes of the thread (after = estimate for a dry run).
        head_messages_sha256: canonical digest of the root-namespace head after materialization.
        first_difference: where an integrity or verification check differed, with both digests.
        findings: the materializer's findings ``[{"kind", "checkpoint_id", "checkpoint_ns", "detail", "blocking"}]``.
        error, hint, error_code: what went wrong and what to do (text), never a traceback.
        backup_id: the backup a conversion wrote, or the backup a revert restores.
        worker_*: who ran it: host name, Celery node, OS pid, frozen mode and snapshot cadence.
        attempts: claims of this row (count); the claim number is the token a recording must match.
        duration_s: wall time of the last attempt (seconds).
        prune: prune kinds only, the thread's :class:`deerflow.retention.PruneReport` lists:
            ``{"rule", "kept_checkpoint_ids", "deleted_checkpoint_ids", "protected_checkpoint_ids",
            "protected": [{"checkpoint_ns", "checkpoint_id", "reason"}], "rebased_checkpoint_ids",
            "unbranchable_checkpoint_ids", "deleted_namespaces"}``; ``{}`` otherwise. For these kinds
            ``checkpoints_rewritten`` counts the checkpoints deleted (or to delete).
        deerflow: a writing job's dealings with a live DeerFlow (:mod:`dashboard.jobs.reservations`):
            ``{"reservation": {"run_id", "renewals", "lost"} | None, "cache_purge": {"type", "key_prefix",
            "keys_deleted", "error"} | None}`` after the thread ran, or ``{"run_in_flight": {"run_id", "status",
            "operation_kind", "owner_worker_id", "created_at", "age_s"} | None}`` when DeerFlow held it;
            ``{}`` for dry runs, reclaims and rows that have not run.
        queued_at: when the row's task, last sent to the broker, falls due (send time plus its
            countdown); a row still ``queued`` ``DASHBOARD_REQUEUE_AFTER_S`` after that is sent
            again (:func:`dashboard.jobs.stalls.requeue_stalled`).
        batch: the rows sent to the workers in one task share it (the id of the batch's first row;
            :mod:`dashboard.jobs.batches`); ``None`` for a row never sent.
    """

    Status = ResultStatus
    PENDING, QUEUED, RUNNING = ResultStatus.PENDING.value, ResultStatus.QUEUED.value, ResultStatus.RUNNING.value
    SKIPPED, REFUSED, ERROR = ResultStatus.SKIPPED.value, ResultStatus.REFUSED.value, ResultStatus.ERROR.value
    IN_FLIGHT = (QUEUED, RUNNING)
    OPEN = (PENDING, QUEUED, RUNNING)
    STATUSES = tuple(dict.fromkeys((*(s.value for s in ResultStatus), *REPORT_STATUSES,
                                    *PRUNE_STATUSES, "reclaimed")))

    job = models.ForeignKey(ConversionJob, on_delete=models.CASCADE, related_name="results")
    thread_id = models.TextField()
    status = models.CharField(max_length=32, choices=[(s, s) for s in STATUSES], default=PENDING, db_index=True)
    checkpoints_total = models.PositiveIntegerField(default=0)
    checkpoints_rewritten = models.PositiveIntegerField(default=0)
    bytes_before = models.BigIntegerField(default=0)
    bytes_after = models.BigIntegerField(default=0)
    head_messages_sha256 = models.CharField(max_length=64, blank=True)
    first_difference = models.JSONField(null=True, blank=True)
    findings = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    hint = models.TextField(blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    backup_id = models.CharField(max_length=64, blank=True)
    worker_host = models.CharField(max_length=255, blank=True)
    worker_node = models.CharField(max_length=255, blank=True)
    worker_pid = models.PositiveIntegerField(null=True, blank=True)
    worker_mode = models.CharField(max_length=8, blank=True)
    worker_snapshot_frequency = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    queued_at = models.DateTimeField(null=True, blank=True)
    prune = models.JSONField(default=dict, blank=True)
    deerflow = models.JSONField(default=dict, blank=True)
    batch = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        # thread_id: a thread page lists the jobs that touched it (dashboard.jobs.provenance) without a scan.
        indexes = [models.Index(fields=["job", "status"]),
                   models.Index(fields=["thread_id"], name="jobs_result_thread_idx")]

    def __str__(self) -> str:
        return f"{self.thread_id} ({self.status})"


class RetentionPolicy(models.Model):
    """A saved retention rule over a selection, run by Celery beat on a schedule (off by default).

    Each run (:func:`dashboard.jobs.policies.run_policy`) is a normal ``prune`` job, runner
    ``celery``, launched by ``policy:<name>``.

    Attributes:
        name: unique; the job's ``launched_by`` is ``policy:<name>``.
        idle_days: only threads whose newest checkpoint is older than this (days), or ``None``.
        filter: the thread list's filter (``{"q", "mode", "thread_class"}``; empty values ignored), or ``{}``.
            At least one of ``idle_days`` and ``filter`` selects; neither means every thread.
        rule, keep_last, protect, backup: the job's retention (see :attr:`ConversionJob.retention`).
        max_delete_per_run: most threads one run prunes or deletes (count, >= 0), the rest left to the next
            run; ``None``: no cap.
        schedule: a crontab in the five standard fields (``minute hour day-of-month month day-of-week``, UTC),
            read by Celery's own :class:`celery.schedules.crontab`.
        enabled: beat runs only enabled policies (default off).
        last_run_at, last_job, last_error: the latest run: when, its job, or why it made none.
    """

    class Rule(models.TextChoices):
        KEEP_LAST = "keep_last", "keep the last N checkpoints"
        SAFE_ONLY = "safe_only", "only the provably safe shapes"
        DELETE_THREADS = "delete_threads", "delete the threads whole"

    name = models.CharField(max_length=100, unique=True)
    idle_days = models.FloatField(null=True, blank=True)
    filter = models.JSONField(default=dict, blank=True)
    rule = models.CharField(max_length=16, choices=Rule.choices, default=Rule.KEEP_LAST)
    keep_last = models.PositiveIntegerField(null=True, blank=True)
    protect = models.JSONField(default=list, blank=True)
    backup = models.BooleanField(default=True)
    max_delete_per_run = models.PositiveIntegerField(null=True, blank=True)
    schedule = models.CharField(max_length=100, default="0 3 * * *")
    enabled = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_job = models.ForeignKey(ConversionJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "retention policies"

    def __str__(self) -> str:
        return f"policy {self.name} ({'on' if self.enabled else 'off'})"
