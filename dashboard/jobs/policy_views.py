"""``/jobs/policies/``: retention policies (list, create, edit, enable).

Any staff may read them (GET routes never refuse staff); saving one needs ``jobs.manage_retention``.

A policy is run by Celery beat on its schedule (:mod:`dashboard.jobs.policies`); each run is a normal prune
job, linked from the list.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from dashboard.accounts.auth import staff_required
from dashboard.errors import error_page
from dashboard.jobs import kinds
from dashboard.jobs.forms import RetentionPolicyForm
from dashboard.jobs.models import ConversionJob, RetentionPolicy
from dashboard.jobs.schedules import InvalidSchedule, is_due

__all__ = ["policy_edit", "policy_list"]


@require_GET
@staff_required
def policy_list(request: HttpRequest) -> HttpResponse:
    """Every policy with its selection, rule, schedule, state and last run."""
    return render(request, "jobs/policies.html", {"policies": RetentionPolicy.objects.select_related("last_job")})


@require_http_methods(["GET", "POST"])
@staff_required
def policy_edit(request: HttpRequest, policy_id: int | None = None) -> HttpResponse:
    """The policy form (GET, any staff); save it and go back to the list (POST, ``jobs.manage_retention``),
    or show the form's errors (400)."""
    missing = kinds.missing_permission(request.user, {kinds.kind_permission(ConversionJob.Kind.PRUNE)})
    if request.method == "POST" and missing:
        return error_page(request, kinds.refusal(missing))
    policy = get_object_or_404(RetentionPolicy, pk=policy_id) if policy_id is not None else RetentionPolicy()
    form = RetentionPolicyForm(request.POST or None, instance=policy)
    if request.method == "POST":
        if form.is_valid():
            form.save()
            return redirect(reverse("jobs:policies"))
        return render(request, "jobs/policy_form.html", {"form": form, "policy": policy}, status=400)
    try:
        due = bool(policy.pk) and policy.enabled and is_due(policy, timezone.now())
    except InvalidSchedule:
        due = False
    return render(request, "jobs/policy_form.html", {"form": form, "policy": policy, "due": due})

