"""Pages of "Prune history…": the dry run (step 1), the confirmation page, the prune (step 2).

``POST /jobs/prune/launch`` starts a prune dry run of the posted selection and
rule (from the thread page or a filtered thread list) and redirects to its job
page, which lists per thread what is kept, deleted, protected and why.
``GET /jobs/<dry run>/prune/confirm`` repeats the blast radius (threads,
checkpoints deleted, bytes before and after per thread, what becomes
un-resumable, what cannot be undone without a backup); its button posts to
``POST /jobs/<dry run>/prune``, which starts the prune and redirects to its
job page. Launching and confirming need the prune kinds' permission
(``jobs.manage_retention``, :mod:`dashboard.jobs.kinds`); any staff may read the pages.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from dashboard.accounts.auth import staff_required
from dashboard.errors import ErrorView, error_page
from dashboard.jobs import kinds
from dashboard.jobs.creation import is_finished_dry_run
from dashboard.jobs.forms import ConfirmPruneForm, LaunchPruneForm
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.pruning import REASON_WORDS
from dashboard.jobs.views import confirm_writing_job, launch_dry_run, launch_required

__all__ = ["confirm_prune", "prune_confirm", "prune_confirm_page", "prune_launch"]


@require_POST
@launch_required(ConversionJob.Kind.PRUNE_DRY_RUN)
def prune_launch(request: HttpRequest) -> HttpResponse:
    """"Prune history…", step 1: a prune dry run of the chosen threads by the posted rule, then its job page."""
    return launch_dry_run(request, ConversionJob.Kind.PRUNE_DRY_RUN, LaunchPruneForm)


@require_POST
@launch_required(ConversionJob.Kind.PRUNE)
def confirm_prune(request: HttpRequest, job_id: int) -> HttpResponse:
    """"Prune history…", step 2: prune what the finished prune dry run ``job_id`` previewed, then the job page."""
    return confirm_writing_job(request, job_id, ConversionJob.Kind.PRUNE, ConfirmPruneForm, prune_confirm_page)


@require_GET
@staff_required
def prune_confirm(request: HttpRequest, job_id: int) -> HttpResponse:
    """The confirmation page of a finished prune dry run (any staff may read it; the button needs
    ``jobs.manage_retention``, like the form it posts)."""
    dry_run = get_object_or_404(ConversionJob, pk=job_id)
    if not is_finished_dry_run(dry_run, ConversionJob.Kind.PRUNE):
        return error_page(request, ErrorView(409, "not_a_finished_prune_dry_run",
                                             f"Job {dry_run.pk} is not a finished prune dry run: there is no preview "
                                             "to confirm.", "Open a finished prune dry run's page and use its "
                                             "\"Prune…\" link."))
    template, context = prune_confirm_page(dry_run)
    return render(request, template, context)


def prune_confirm_page(dry_run: ConversionJob, form=None, error: ErrorView | None = None) -> tuple[str, dict]:
    """The template and context of a finished prune dry run's confirmation page (``form``: a bound form that
    failed, shown with its field errors; ``error``: a refusal of the posted prune)."""
    rows = list(dry_run.results.filter(status__in=kinds.get(ConversionJob.Kind.PRUNE).would_write)
                .order_by("thread_id"))
    before, after = sum(r.bytes_before for r in rows), sum(r.bytes_after for r in rows)
    return "jobs/prune_confirm.html", {
        "job": dry_run, "rows": rows, "before": before, "after": after, "freed": before - after,
        "deleted": sum(r.checkpoints_rewritten for r in rows),
        "unbranchable": sum(len(r.prune.get("unbranchable_checkpoint_ids", [])) for r in rows),
        "whole_threads": dry_run.retention.get("rule") == "delete_threads", "reason_words": REASON_WORDS,
        "confirm_form": form or ConfirmPruneForm(initial={"throttle_delay_s": 0, "max_in_flight": 1}),
        "confirm_error": error}
