"""What a prune reports per thread (the command's ``--json`` row and the job's result), and its one error."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from deerflow.convert.report import Abort

__all__ = ["FAILED", "PruneReport", "PruneStatus", "RetentionAbort", "STATUSES"]

class PruneStatus(StrEnum):
    """A prune status of one thread; the values are stored in ``ThreadResult.status`` and sent in JSON."""

    WOULD_PRUNE = "would_prune"
    PRUNED = "pruned"
    NOTHING_TO_PRUNE = "nothing_to_prune"
    WOULD_DELETE = "would_delete"
    DELETED = "deleted"
    NOT_FOUND = "not_found"
    BLOCKED = "blocked"
    VERIFICATION_FAILED = "verification_failed"
    CHANGED_DURING_PRUNE = "changed_during_prune"
    REVERTED = "reverted"


#: Every status value as a plain string, in the order above.
STATUSES = tuple(s.value for s in PruneStatus)
FAILED = ("not_found", "blocked", "verification_failed", "changed_during_prune")


class RetentionAbort(Abort):
    """A prune of one thread stopped; the transaction is rolled back. Carries the report's status
    (one of :data:`STATUSES`), error, hint and difference, as :class:`deerflow.convert.report.Abort` does."""


@dataclass
class PruneReport:
    """The outcome of a dry run or a prune of one thread.

    Attributes:
        thread_id: the thread.
        rule: ``keep_last``, ``safe_only`` or ``delete_thread``.
        status: one of :data:`STATUSES`.
        kept_checkpoint_ids, deleted_checkpoint_ids: checkpoint ids (every namespace), sorted.
        protected_checkpoint_ids: kept ids the rule had to keep, sorted; ``protected`` gives each with its
            ``checkpoint_ns`` and ``reason`` (``head``, ``resume_target``, ``pending_writes``, ``chain_to_seed``).
        rebased_checkpoint_ids: chain starts whose value was stored as a ``_DeltaSnapshot``.
        unbranchable_checkpoint_ids: deleted checkpoints on a head's chain (older turns no longer resumable
            or forkable).
        deleted_namespaces: subgraph namespaces deleted whole.
        restored_checkpoint_ids: a revert (rule ``revert``): the checkpoint ids it put back, sorted.
        bytes_before, bytes_after: bytes in LangGraph's tables (``bytes_after`` estimated by a dry run).
        backup_id: the whole-thread backup (``None`` with ``backup=False`` or on memory).
        attempts: transactions tried (count). duration_s: wall time (seconds).
        error, hint, first_difference: for failure statuses.
    """

    thread_id: str
    rule: str = ""
    status: str = "would_prune"
    kept_checkpoint_ids: list[str] = field(default_factory=list)
    deleted_checkpoint_ids: list[str] = field(default_factory=list)
    protected_checkpoint_ids: list[str] = field(default_factory=list)
    protected: list[dict[str, str]] = field(default_factory=list)
    rebased_checkpoint_ids: list[str] = field(default_factory=list)
    unbranchable_checkpoint_ids: list[str] = field(default_factory=list)
    deleted_namespaces: list[str] = field(default_factory=list)
    restored_checkpoint_ids: list[str] = field(default_factory=list)
    bytes_before: int = 0
    bytes_after: int = 0
    backup_id: str | None = None
    attempts: int = 0
    duration_s: float = 0.0
    error: str | None = None
    hint: str | None = None
    first_difference: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        """True for a failure status (nothing was written)."""
        return self.status in FAILED

    def describe(self, plan: Any, rebased: list[tuple[str, str]]) -> None:
        """Fill the id lists from a :class:`~deerflow.retention.plan.Plan`."""
        self.kept_checkpoint_ids = sorted(cid for _ns, cid in plan.kept)
        self.deleted_checkpoint_ids = sorted(cid for _ns, cid in plan.deleted)
        self.protected_checkpoint_ids = sorted(cid for _ns, cid in plan.protected)
        self.protected = [{"checkpoint_ns": ns, "checkpoint_id": cid, "reason": reason}
                          for (ns, cid), reason in sorted(plan.protected.items())]
        self.rebased_checkpoint_ids = sorted(cid for _ns, cid in rebased)
        self.unbranchable_checkpoint_ids = sorted(cid for _ns, cid in plan.unbranchable)
        self.deleted_namespaces = sorted(plan.deleted_namespaces)

    def fail(self, exc: RetentionAbort) -> None:
        """Record a failure (the id lists stay as planned, for the operator)."""
        self.status, self.error, self.hint, self.first_difference = exc.status, exc.error, exc.hint, exc.difference

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        return asdict(self)
