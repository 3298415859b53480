"""Job progress computed from its ThreadResult rows: done/total, rate, time left, totals."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Sum
from django.utils import timezone

from dashboard.jobs import kinds
from dashboard.jobs.models import ConversionJob, ThreadResult

__all__ = ["Progress", "progress", "succeeded"]

def succeeded(kind: str, status: str) -> bool:
    """``status`` is a success for a job of ``kind`` (its declared :attr:`JobKind.success`)."""
    return status in kinds.get(kind).success


@dataclass(frozen=True)
class Progress:
    """Where a job stands.

    Attributes:
        total: threads in the job (count).
        done: threads with an outcome, skipped ones included (count).
        ran: threads that ran to an outcome, ``succeeded + failed`` (``done`` without the skipped ones).
        succeeded, failed, skipped, in_flight, pending: counts by outcome / stage.
        percent: ``done / total`` in percent (0..100): how much of the job is behind it.
        percent_ran: ``ran / total`` in percent (0..100): what the pages' bars show, so a
            cancelled job's skipped threads do not look converted.
        elapsed_s: seconds since the job started (to its end when finished).
        rate_per_min: threads finished per minute so far, ``None`` before the first one.
        eta_s: estimated seconds left at that rate, ``None`` when unknown or finished.
        checkpoints_rewritten, bytes_before, bytes_after: sums over finished threads.
    """

    total: int
    done: int
    ran: int
    succeeded: int
    failed: int
    skipped: int
    in_flight: int
    pending: int
    percent: float
    percent_ran: float
    elapsed_s: float
    rate_per_min: float | None
    eta_s: float | None
    checkpoints_rewritten: int
    bytes_before: int
    bytes_after: int

    def as_dict(self) -> dict:
        """JSON-friendly copy."""
        return dict(self.__dict__)


def _counts(job: ConversionJob) -> dict[str, int]:
    return dict(job.results.values_list("status").annotate(n=Count("id")).order_by())


def _percent(part: int, total: int) -> float:
    return round(100.0 * part / total, 1) if total else 100.0


def progress(job: ConversionJob) -> Progress:
    """The job's progress now (one grouped query plus one sum)."""
    counts = _counts(job)
    total = sum(counts.values())
    ok = sum(n for s, n in counts.items() if succeeded(job.kind, s))
    skipped = counts.get(ThreadResult.SKIPPED, 0)
    in_flight = sum(counts.get(s, 0) for s in ThreadResult.IN_FLIGHT)
    pending = counts.get(ThreadResult.PENDING, 0)
    done = total - in_flight - pending
    failed = done - ok - skipped
    end = job.finished_at or timezone.now()
    elapsed = max((end - job.started_at).total_seconds(), 0.0) if job.started_at else 0.0
    ran = ok + failed
    rate = ran / elapsed * 60 if ran and elapsed > 0 else None
    eta = None if job.finished or rate is None else (pending + in_flight) / rate * 60
    sums = job.results.exclude(status__in=ThreadResult.OPEN).aggregate(
        c=Sum("checkpoints_rewritten"), b=Sum("bytes_before"), a=Sum("bytes_after"))
    return Progress(total=total, done=done, ran=ran, succeeded=ok, failed=failed, skipped=skipped, in_flight=in_flight,
                    pending=pending, percent=_percent(done, total), percent_ran=_percent(ran, total),
                    elapsed_s=round(elapsed, 1), rate_per_min=round(rate, 2) if rate else None,
                    eta_s=round(eta, 1) if eta is not None else None, checkpoints_rewritten=sums["c"] or 0,
                    bytes_before=sums["b"] or 0, bytes_after=sums["a"] or 0)
