"""``/jobs/<dry run id>/confirm``: the confirmation page before "Convert to full", Django-admin style.

It lists every thread the conversion would rewrite with its checkpoints and
bytes now → after (the dry run's estimate), the growth factor, and marks the
outliers; it says what the conversion keeps (a backup per thread, revertible
until purged). Its button posts to ``/jobs/<id>/convert`` (the same form as
the dry run's page), which redirects to the new job.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from dashboard.accounts.auth import staff_required
from dashboard.errors import ErrorView
from dashboard.jobs.forms import ConfirmConvertForm
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.middleware import error_page

__all__ = ["GROWTH_OUTLIER", "SIZE_OUTLIER", "ConfirmRow", "confirm_rows", "convert_confirm"]

#: A thread is an outlier when its growth factor is this many times the median growth ...
GROWTH_OUTLIER = 2.0
#: ... or its size after conversion this many times the median size after.
SIZE_OUTLIER = 3.0


@dataclass(frozen=True)
class ConfirmRow:
    """One thread to convert: the dry run's result, ``growth`` (after / before, ``None`` from 0 bytes), ``outlier``."""

    result: ThreadResult
    growth: float | None
    outlier: bool


def confirm_rows(results: list[ThreadResult]) -> list[ConfirmRow]:
    """The rows of the page, heaviest after-size first, outliers marked (see :data:`GROWTH_OUTLIER`)."""
    growths = [r.bytes_after / r.bytes_before for r in results if r.bytes_before]
    mid_growth = median(growths) if growths else 0.0
    mid_after = median([r.bytes_after for r in results]) if results else 0
    rows = []
    for r in sorted(results, key=lambda r: (-r.bytes_after, r.thread_id)):
        growth = r.bytes_after / r.bytes_before if r.bytes_before else None
        outlier = len(results) > 2 and ((growth is not None and mid_growth and growth > GROWTH_OUTLIER * mid_growth)
                                        or (mid_after and r.bytes_after > SIZE_OUTLIER * mid_after))
        rows.append(ConfirmRow(r, growth, bool(outlier)))
    return rows


@require_GET
@staff_required
def convert_confirm(request: HttpRequest, job_id: int) -> HttpResponse:
    """The confirmation page of a finished dry run's conversion (any staff may read it; the button needs
    ``jobs.manage_conversions``, like the form it posts)."""
    dry_run = get_object_or_404(ConversionJob, pk=job_id)
    if dry_run.kind != ConversionJob.Kind.DRY_RUN or not dry_run.finished:
        return error_page(request, ErrorView(409, "not_a_finished_dry_run",
                                             f"Job {dry_run.pk} is not a finished dry run: there is no estimate to confirm.",
                                             "Open a finished dry run's page and use its Convert button."))
    results = list(dry_run.results.filter(status="needs_conversion"))
    before = sum(r.bytes_before for r in results)
    after = sum(r.bytes_after for r in results)
    return render(request, "jobs/convert_confirm.html", {
        "job": dry_run, "rows": confirm_rows(results), "before": before, "after": after,
        "growth": after / before if before else None, "growth_outlier": GROWTH_OUTLIER, "size_outlier": SIZE_OUTLIER,
        "checkpoints": sum(r.checkpoints_rewritten for r in results),
        "over_limit": dry_run.size_limit_bytes is not None and after > dry_run.size_limit_bytes,
        "confirm_form": ConfirmConvertForm(initial={"throttle_delay_s": 0, "max_in_flight": 1})})
