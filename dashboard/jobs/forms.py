"""Every POST of the jobs pages and API is validated by one of these forms."""

from __future__ import annotations

from typing import Any

from django import forms

from dashboard.jobs.errors import EMPTY_LAUNCH_HINT, InvalidSelection
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.selection import FILTER_KEYS, check_request_bounds
from deerflow.inventory import THREAD_CLASSES

__all__ = ["ApiJobForm", "ConfirmConvertForm", "JobActionForm", "JobResultsPageForm", "LaunchForm",
           "PurgeBackupForm"]

_MODES = [("", "any"), ("full", "full"), ("delta", "delta")]
_CLASSES = [("", "any")] + [(c, c) for c in THREAD_CLASSES]


class ThreadIdsField(forms.Field):
    """Zero or more thread ids, sent as repeated ``thread_id`` fields."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        values = [value] if isinstance(value, str) else list(value or [])
        return list(dict.fromkeys(v for v in values if v))


class JsonBooleanField(forms.Field):
    """A JSON ``true`` or ``false`` (or ``null``/absent: ``None``); anything else, ``"maybe"`` or ``1``
    included, is refused instead of being taken as true (Django's BooleanField takes any non-empty string)."""

    def to_python(self, value: Any) -> bool | None:
        if value is None or isinstance(value, bool):
            return value
        raise forms.ValidationError(f"must be true or false (a JSON boolean), not {value!r}", code="invalid")

    def validate(self, value: Any) -> None:
        if value is None and self.required:
            raise forms.ValidationError(self.error_messages["required"], code="required")


class LaunchForm(forms.Form):
    """``POST /jobs/launch``: start the dry run (estimate) of "Convert to full".

    Either ``thread_id`` (repeated) or the thread list's filter fields. Neither
    is no selection (:meth:`selection` raises); every delta thread is the
    explicit filter ``mode=delta``.
    """

    thread_id = ThreadIdsField(required=False)
    mode = forms.ChoiceField(choices=_MODES, required=False)
    thread_class = forms.ChoiceField(choices=_CLASSES, required=False)
    q = forms.CharField(max_length=2000, required=False)
    updated_before = forms.DateTimeField(required=False)
    updated_after = forms.DateTimeField(required=False)
    skip_integrity = forms.BooleanField(required=False)
    acknowledge_branch_ambiguous = forms.BooleanField(required=False)

    def selection(self) -> dict[str, Any]:
        """The job selection (see :mod:`dashboard.jobs.selection`).

        Raises:
            InvalidSelection: neither thread ids nor any filter field was given.
            SelectionTooLarge, IdTooLong: the ids are beyond the request bounds (:mod:`dashboard.jobs.selection`).
        """
        data = self.cleaned_data
        if data["thread_id"]:
            check_request_bounds({"thread_ids": data["thread_id"]})
            return {"thread_ids": data["thread_id"]}
        chosen = {k: (v.isoformat() if hasattr(v, "isoformat") else v) or None
                  for k, v in data.items() if k in FILTER_KEYS}
        if not any(chosen.values()):
            raise InvalidSelection("No threads chosen: give a thread id or at least one filter "
                                   "(id contains, mode, class, updated before/after).", hint=EMPTY_LAUNCH_HINT)
        return {"filter": chosen}


class ConfirmConvertForm(forms.Form):
    """``POST /jobs/<dry run id>/convert``: convert the threads the dry run found convertible."""

    confirm_size = forms.BooleanField(required=False, label="I accept the estimated size above the limit")
    throttle_delay_s = forms.FloatField(min_value=0, max_value=3600, required=False, initial=0,
                                        label="Delay between threads (s)")
    max_in_flight = forms.IntegerField(min_value=1, max_value=32, required=False, initial=1,
                                       label="Threads at once")
    skip_integrity = forms.BooleanField(required=False, label="Skip the integrity check")

    def options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`services.create_job`."""
        data = self.cleaned_data
        return {"confirmed": data["confirm_size"], "throttle_delay_s": data["throttle_delay_s"] or 0.0,
                "max_in_flight": data["max_in_flight"] or 1, "integrity": not data["skip_integrity"]}


class ConfirmCompactForm(ConfirmConvertForm):
    """``POST /jobs/<compaction dry run id>/compact``: compact what the dry run found (no size limit: it shrinks)."""

    force_full_fleet = forms.BooleanField(required=False, label="Compact although full-mode processes are live")

    def options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`services.create_job`."""
        return {**super().options(), "confirmed": True,
                "force_full_fleet": self.cleaned_data["force_full_fleet"]}


class JobActionForm(forms.Form):
    """``POST /jobs/<id>/action``: one of the job buttons."""

    action = forms.ChoiceField(choices=[(a, a) for a in ("pause", "resume", "cancel", "retry", "revert")])


class PurgeBackupForm(forms.Form):
    """``POST /jobs/backups/purge``: delete one backup's rows, once the "cannot be undone" box is ticked."""

    backup_id = forms.CharField(max_length=64)
    confirm = forms.BooleanField(error_messages={
        "required": "tick \"cannot be undone\" next to the button: a purged backup's thread can no longer be reverted"})


class ApiJobForm(forms.Form):
    """``POST /api/jobs`` JSON body.

    ``{"kind", "thread_ids" | "filter" | "backup_ids", "estimate_job", "confirmed",
    "throttle_delay_s", "max_in_flight", "integrity", "size_limit_bytes", "force_full_fleet",
    "acknowledge_branch_ambiguous"}`` (``force_full_fleet``: ``compact`` although live full-mode processes
    are registered; ``acknowledge_branch_ambiguous``: convert sibling forks as LangGraph's reader reads them).
    """

    kind = forms.ChoiceField(choices=ConversionJob.Kind.choices)
    thread_ids = forms.JSONField(required=False)
    filter = forms.JSONField(required=False)
    backup_ids = forms.JSONField(required=False)
    estimate_job = forms.IntegerField(required=False, min_value=1)
    confirmed = JsonBooleanField(required=False)
    throttle_delay_s = forms.FloatField(min_value=0, max_value=3600, required=False)
    max_in_flight = forms.IntegerField(min_value=1, max_value=32, required=False)
    integrity = JsonBooleanField(required=False)
    size_limit_bytes = forms.IntegerField(min_value=1, required=False)
    force_full_fleet = JsonBooleanField(required=False)
    acknowledge_branch_ambiguous = JsonBooleanField(required=False)

    def selection(self) -> dict[str, Any] | None:
        """The selection, or ``None`` to derive it from ``estimate_job``."""
        data = self.cleaned_data
        chosen = {k: data[k] for k in ("thread_ids", "filter", "backup_ids") if data.get(k)}
        return chosen or None

    def options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`services.create_job` (besides kind, selection, source job)."""
        data = self.cleaned_data
        return {"confirmed": bool(data["confirmed"]), "throttle_delay_s": data["throttle_delay_s"] or 0.0,
                "max_in_flight": data["max_in_flight"] or 1,
                "integrity": data["integrity"] is not False, "size_limit_bytes": data["size_limit_bytes"],
                "force_full_fleet": bool(data.get("force_full_fleet")),
                "acknowledge_branch_ambiguous": bool(data.get("acknowledge_branch_ambiguous"))}


class JobResultsPageForm(forms.Form):
    """``GET /api/jobs/<id>?results_offset=&results_limit=``: which page of per-thread results."""

    #: Results per page when ``results_limit`` is not given, and the most a page may hold.
    DEFAULT_LIMIT, MAX_LIMIT = 500, 1000

    results_offset = forms.IntegerField(min_value=0, max_value=2**31 - 1, required=False)
    results_limit = forms.IntegerField(min_value=1, max_value=MAX_LIMIT, required=False)

    def page(self) -> tuple[int, int]:
        """``(offset, limit)``."""
        data = self.cleaned_data
        return data["results_offset"] or 0, data["results_limit"] or self.DEFAULT_LIMIT


class RevertBackupForm(forms.Form):
    """``/jobs/backups/revert``: the backup to restore its thread from."""

    backup_id = forms.CharField(max_length=64)
