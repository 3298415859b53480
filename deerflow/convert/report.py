"""What a conversion or compaction of one thread reports: statuses, :class:`ThreadReport`, and the abort that
ends an attempt with one of them (shared by :mod:`deerflow.convert.converter` and :mod:`deerflow.convert.compactor`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from deerflow.errors import DeerFlowError

__all__ = ["Abort", "ReportStatus", "STATUSES", "ThreadReport", "record"]


class ReportStatus(StrEnum):
    """A conversion or compaction status of one thread; the values are stored in ``ThreadResult.status``
    and sent in JSON."""

    ALREADY_FULL = "already_full"
    NEEDS_CONVERSION = "needs_conversion"
    BLOCKED = "blocked"
    INTEGRITY_MISMATCH = "integrity_mismatch"
    CONVERTED = "converted"
    REVERTED = "reverted"
    VERIFICATION_FAILED = "verification_failed"
    CHANGED_DURING_CONVERSION = "changed_during_conversion"
    NOT_FOUND = "not_found"
    # sibling forks whose writes may belong to either child (onepass ``branch_ambiguous``), not acknowledged
    BRANCH_AMBIGUOUS = "branch_ambiguous"
    # full -> delta compaction (deerflow.convert.compactor)
    ALREADY_DELTA = "already_delta"
    NEEDS_COMPACTION = "needs_compaction"
    COMPACTED = "compacted"


#: Every status value as a plain string, in the order above.
STATUSES = tuple(s.value for s in ReportStatus)


@dataclass
class ThreadReport:
    """The outcome of a dry run, a conversion or a compaction of one thread.

    Attributes:
        thread_id: the thread.
        status: one of :data:`STATUSES`.
        checkpoints_total: checkpoints in every namespace (count).
        checkpoints_to_rewrite: checkpoints whose stored value or metadata changes (count).
        bytes_before: bytes in LangGraph's tables before (checkpoints, blobs, writes).
        bytes_after: bytes after conversion (estimated by a dry run, measured after a conversion).
        findings: ``[{"kind", "checkpoint_id", "checkpoint_ns", "detail", "blocking"}]``.
        first_difference: for ``integrity_mismatch`` / ``verification_failed``: where and both digests
            (plus ``langgraph_error`` when LangGraph's reader failed during the integrity check).
        head_messages_sha256: canonical digest of the root namespace head after materialization
            (``None`` when a blocking finding leaves the head's value unknown).
        backup_id: the backup holding the original rows (after a conversion).
        snapshot_positions: compaction only: where a ``_DeltaSnapshot`` of ``messages`` is (or would be)
            stored, ``[{"checkpoint_ns", "checkpoint_id", "step", "reason"}]`` in walk order; ``reason`` is
            ``cadence`` (K updates), ``supersteps`` (LangGraph's bound), ``writes`` (the stored value is not
            what replaying the writes gives: Overwrite, summarization, fork, missing writes) or ``seam``
            (a legacy full checkpoint an already-delta checkpoint replays from).
        bytes_freed: ``bytes_before - bytes_after`` (bytes; negative when a rewrite grows the thread).
        attempts: transactions tried (count).
        duration_s: wall time (seconds).
        error, hint: what went wrong and what to do, for non-success statuses.
        acknowledged: blocking finding kinds the operator accepted for this run (``["branch_ambiguous"]``
            or ``[]``); their checkpoints are written as LangGraph's reader reads them.
    """

    thread_id: str
    status: str = "needs_conversion"
    checkpoints_total: int = 0
    checkpoints_to_rewrite: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)
    first_difference: dict[str, Any] | None = None
    head_messages_sha256: str | None = None
    backup_id: str | None = None
    snapshot_positions: list[dict[str, Any]] = field(default_factory=list)
    bytes_freed: int = 0
    attempts: int = 0
    duration_s: float = 0.0
    error: str | None = None
    hint: str | None = None
    acknowledged: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        return asdict(self)


class Abort(DeerFlowError):
    """A rewrite of one thread (conversion, compaction, revert) stopped; its transaction is rolled back.

    Raised inside a rewrite and caught by it: :func:`record` puts ``status``
    (one of :data:`STATUSES`), ``error``, ``hint`` and ``difference`` (where
    and both digests, for a verification failure) on the thread's report, so
    callers see a report, never this exception.
    """

    def __init__(self, status: str, error: str, hint: str, difference: dict[str, Any] | None = None):
        super().__init__(error)
        self.status, self.error, self.hint, self.difference = status, error, hint, difference


def record(report: ThreadReport, exc: Abort) -> None:
    """Put an :class:`Abort`'s status, error, hint and difference on ``report``."""
    report.status, report.error, report.hint = exc.status, exc.error, exc.hint
    report.first_difference = exc.difference
