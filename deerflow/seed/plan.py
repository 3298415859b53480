"""What a seed writes (:class:`SeedPlan`), what it reports, and how it refuses or stops."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deerflow.errors import DeerFlowError

__all__ = ["MAX_TEMPLATES", "MAX_THREADS", "MAX_TURNS", "MODES", "SeedInterrupted", "SeedPlan", "SeedReport",
           "SeededThread", "ThreadExistsError"]

MODES = ("full", "delta", "mixed")
#: Upper bounds of a plan (counts). Recording a template costs time and memory that grow faster
#: than its turns (the whole history is rewritten at every snapshot), so callers without
#: ``text_scale`` (``manage.py seed_threads``) bound turns much lower.
MAX_THREADS = 10_000_000
MAX_TURNS = 5000
MAX_TEMPLATES = 1000
#: Thread ids looked up per query by the existence check (under SQLite's historical 999-parameter limit).


@dataclass(frozen=True)
class SeedPlan:
    """What to write.

    Attributes:
        threads: threads to create (count, 1..:data:`MAX_THREADS`).
        turns_min, turns_max: turns per thread, drawn uniformly (counts, 1 <= min <= max <= :data:`MAX_TURNS`).
        mode: ``"full"``, ``"delta"`` or ``"mixed"``.
        snapshot_frequency: delta cadence (updates per ``_DeltaSnapshot``, >= 1).
        seed: makes the run reproducible (content, thread ids, times); random when ``None``.
        templates: distinct recorded shapes to copy from (count, 1..:data:`MAX_TEMPLATES`; fewer if
            ``threads`` is smaller).
        fork_rate: fraction of templates with a fork turn (0..1).
        long_output_rate: probability that a tool output is 8-32 KB (0..1).
        text_scale: multiplies every other message length (1.0: realistic prose; smaller for
            benchmarks whose output grows with the square of the history, like conversion to full).
        max_tool_rounds: at most this many tool rounds per turn (0..3; 0: plain question/answer turns).
        span_days: threads end at random times within this many days before now.
        batch_threads: threads per COPY/transaction (count; a batch is also flushed at 64 MB).
    """

    threads: int
    turns_min: int
    turns_max: int
    mode: str = "mixed"
    snapshot_frequency: int = 10
    seed: str | int | None = None
    templates: int = 24
    fork_rate: float = 0.15
    long_output_rate: float = 0.05
    text_scale: float = 1.0
    max_tool_rounds: int = 3
    span_days: float = 90.0
    batch_threads: int = 1000

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field, its value and the bound it breaks."""
        if not 1 <= self.threads <= MAX_THREADS:
            raise ValueError(f"threads must be >= 1 and <= {MAX_THREADS:,}; got {self.threads}")
        if not 1 <= self.turns_min <= self.turns_max:
            raise ValueError(f"need 1 <= turns_min <= turns_max; got {self.turns_min}..{self.turns_max}")
        if self.turns_max > MAX_TURNS:
            raise ValueError(f"turns_max must be <= {MAX_TURNS}; got {self.turns_max}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if self.snapshot_frequency < 1:
            raise ValueError(f"snapshot_frequency must be >= 1; got {self.snapshot_frequency}")
        if not 1 <= self.templates <= MAX_TEMPLATES or self.batch_threads < 1:
            raise ValueError(f"need 1 <= templates <= {MAX_TEMPLATES} and batch_threads >= 1; got {self.templates}, "
                             f"{self.batch_threads}")
        if not 0 <= self.max_tool_rounds <= 3 or self.text_scale <= 0:
            raise ValueError(f"need 0 <= max_tool_rounds <= 3 and text_scale > 0; got {self.max_tool_rounds}, "
                             f"{self.text_scale}")


@dataclass(frozen=True)
class SeededThread:
    """One written thread and what LangGraph must read back at its head.

    Attributes:
        thread_id: the thread.
        template: the template key it copies.
        kind: ``full``, ``delta``, ``migrated`` or ``markerless``.
        turns: turns written (count).
        checkpoints: checkpoint rows written (count).
        head_digest: canonical messages digest of the head state the run returned.
        message_count: messages in that state (count).
    """

    thread_id: str
    template: str
    kind: str
    turns: int
    checkpoints: int
    head_digest: str
    message_count: int


@dataclass
class SeedReport:
    """What :func:`seed_threads` wrote.

    Attributes:
        threads, checkpoints, writes, blobs: rows written (counts; blobs are Postgres only).
        bytes: payload bytes sent to the database (bytes).
        seconds: wall time, recording included (seconds).
        record_seconds: of which recording templates (seconds).
        by_kind: threads per template kind (counts).
        samples: every ``len/64``-th thread with its expected head (at most 64).
        summarized: threads whose summary rows were written in their batch's transaction (count;
            0 when the summary was not built yet -- its first refresh builds every row -- or
            with ``summarize=False``).
        summary_seconds: of ``seconds``, spent recomputing those rows (seconds).
        batches: transactions committed (count; each holds whole threads and their summary rows).
        analyze_seconds: of ``seconds``, spent analyzing the loaded tables (seconds).
    """

    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0
    bytes: int = 0
    seconds: float = 0.0
    record_seconds: float = 0.0
    by_kind: dict[str, int] = field(default_factory=dict)
    samples: list[SeededThread] = field(default_factory=list)
    summarized: int = 0
    summary_seconds: float = 0.0
    batches: int = 0
    analyze_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy."""
        out = dict(self.__dict__)
        out["samples"] = [s.__dict__ for s in self.samples]
        return out


class ThreadExistsError(DeerFlowError, ValueError):
    """A thread id the plan would write already has checkpoints in the target database.

    Attributes:
        thread_id: the first such id.
        where: the database, for messages (:func:`describe_database`).
    """

    def __init__(self, thread_id: str, where: str):
        self.thread_id = thread_id
        self.where = where
        super().__init__(f"thread {thread_id} already exists in {where}: use another seed "
                         "(seeding never adds checkpoints to existing threads)")


class SeedInterrupted(KeyboardInterrupt):
    """The seed was interrupted (Ctrl-C): the batches committed before stay, nothing else was written.

    Raised by :func:`seed_threads` in place of the ``KeyboardInterrupt``
    (a subclass, so callers that do not know it still stop). Every batch
    already handed to the writer -- every batch a ``progress`` report
    counted, at most two of them still uncommitted -- is committed first;
    nothing else is written. Each committed batch holds whole threads and,
    with a built summary, their summary rows. The seed's ids of the
    committed threads now exist, so the same seed is refused next time.

    Attributes:
        report: what was committed (:class:`SeedReport`: ``threads``, ``checkpoints``, ``writes``,
            ``blobs``, ``bytes``, ``batches``, ``summarized``; ``samples`` and ``by_kind`` empty).
        where: the database, for messages (:func:`describe_database`).
    """

    def __init__(self, report: SeedReport, where: str):
        super().__init__(f"seed interrupted after {report.threads} threads in {report.batches} batches "
                         f"were committed to {where}")
        self.report = report
        self.where = where
