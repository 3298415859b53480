"""Every POST of the jobs pages and API is validated by one of these forms."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django import forms

from dashboard.errors.jobs import EMPTY_LAUNCH_HINT, InvalidRetention, InvalidSelection
from dashboard.jobs import kinds
from dashboard.jobs.creation import JobOptions
from dashboard.jobs.models import ConversionJob, RetentionPolicy
from dashboard.jobs.pruning import MAX_KEEP_LAST, normalize_retention
from dashboard.jobs.schedules import InvalidSchedule, parse_schedule
from dashboard.jobs.selection import FILTER_KEYS, check_request_bounds
from deerflow.inventory import LIST_CLASSES
from deerflow.inventory.deerflow_tables import MAX_OWNER_LENGTH
from deerflow.runtime.checkpoint_mode import CheckpointMode

__all__ = ["ApiJobForm", "ConfirmConvertForm", "ConfirmPruneForm", "JobActionForm", "JobResultsPageForm",
           "LaunchForm", "LaunchPruneForm", "PurgeBackupForm", "ReclaimForm", "RetentionPolicyForm"]

_MODES = [("", "any")] + [(m.value, m.value) for m in CheckpointMode]
_CLASSES = [("", "any")] + [(c, c) for c in LIST_CLASSES]
#: The longest idle age a retention policy may ask for (days): a span past it selects nothing a calendar holds.
MAX_IDLE_DAYS = 36_500


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
    owner = forms.CharField(max_length=MAX_OWNER_LENGTH, required=False)
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
                                   "(id or title contains, owner, mode, class, updated before/after).",
                                   hint=EMPTY_LAUNCH_HINT)
        return {"filter": chosen}

    def options(self) -> JobOptions:
        """The dry run's :class:`JobOptions`."""
        data = self.cleaned_data
        return JobOptions(integrity=not data["skip_integrity"],
                          acknowledge_branch_ambiguous=data["acknowledge_branch_ambiguous"])


class LaunchPruneForm(LaunchForm):
    """``POST /jobs/prune/launch``: "Prune history…", step 1: the prune dry run of the chosen threads.

    The thread list's filter selects both modes (a prune concerns full and delta threads alike).
    ``protect`` is one checkpoint id per line (or separated by spaces or commas).
    """

    rule = forms.ChoiceField(choices=[("keep_last", "keep the last N checkpoints of each head's chain"),
                                      ("safe_only", "only duration-only leaves and leaf sibling branches"),
                                      ("delete_threads", "delete the threads whole")], initial="keep_last")
    keep_last = forms.IntegerField(min_value=1, max_value=MAX_KEEP_LAST, required=False, initial=20, label="N")
    protect = forms.CharField(max_length=100_000, required=False, widget=forms.Textarea(attrs={"rows": 2}),
                              label="Protected checkpoint ids (resume targets)")

    def clean(self) -> dict[str, Any]:
        """``keep_last`` is needed by rule keep_last and dropped for the others."""
        super().clean()
        data = self.cleaned_data  # what Form.clean returns (typed Optional for overrides that return None)
        if data.get("rule") == "keep_last" and not data.get("keep_last"):
            self.add_error("keep_last", "rule keep_last needs N (a whole number >= 1)")
        elif data.get("rule") != "keep_last":
            data["keep_last"] = None
        return data

    def selection(self) -> dict[str, Any]:
        """As :meth:`LaunchForm.selection`; a filter without a mode selects both modes (``"mode": "any"``)."""
        chosen = super().selection()
        if "filter" in chosen:
            chosen["filter"]["mode"] = chosen["filter"]["mode"] or "any"
        return chosen

    def retention(self) -> dict[str, Any]:
        """The job's rule (validated again by :func:`dashboard.jobs.pruning.normalize_retention`)."""
        data = self.cleaned_data
        protect = [p for p in (data["protect"] or "").replace(",", " ").split() if p]
        return {"rule": data["rule"], "keep_last": data["keep_last"], "protect": protect}

    def options(self) -> JobOptions:
        """The prune dry run's :class:`JobOptions`, its rule included."""
        return replace(super().options(), retention=self.retention())


class ConfirmConvertForm(forms.Form):
    """``POST /jobs/<dry run id>/convert``: convert the threads the dry run found convertible."""

    confirm_size = forms.BooleanField(required=False, label="I accept the estimated size above the limit")
    throttle_delay_s = forms.FloatField(min_value=0, max_value=3600, required=False, initial=0,
                                        label="Delay between threads (s)")
    max_in_flight = forms.IntegerField(min_value=1, max_value=32, required=False, initial=1,
                                       label="Threads at once")
    skip_integrity = forms.BooleanField(required=False, label="Skip the integrity check")

    def options(self, source_job: ConversionJob | None = None) -> JobOptions:
        """The conversion's :class:`JobOptions`, confirmed from dry run ``source_job``."""
        data = self.cleaned_data
        return JobOptions(source_job=source_job, confirmed=data["confirm_size"],
                          throttle_delay_s=data["throttle_delay_s"] or 0.0, max_in_flight=data["max_in_flight"] or 1,
                          integrity=not data["skip_integrity"])


class ConfirmCompactForm(ConfirmConvertForm):
    """``POST /jobs/<compaction dry run id>/compact``: compact what the dry run found (no size limit: it shrinks)."""

    force_full_fleet = forms.BooleanField(required=False, label="Compact although full-mode processes are live")

    def options(self, source_job: ConversionJob | None = None) -> JobOptions:
        """The compaction's :class:`JobOptions` (always confirmed: a compaction has no size limit)."""
        return replace(super().options(source_job), confirmed=True,
                       force_full_fleet=self.cleaned_data["force_full_fleet"])


class ConfirmPruneForm(forms.Form):
    """``POST /jobs/<prune dry run id>/prune``: prune what the dry run previewed (its rule, N, protected set)."""

    understood = forms.BooleanField(error_messages={
        "required": "tick \"I have read what will be deleted\": a prune deletes checkpoints (revertible only "
                    "from its backups)"}, label="I have read what will be deleted")
    no_backup = forms.BooleanField(required=False, label="No backup (frees the bytes now; cannot be reverted)")
    throttle_delay_s = forms.FloatField(min_value=0, max_value=3600, required=False, initial=0,
                                        label="Delay between threads (s)")
    max_in_flight = forms.IntegerField(min_value=1, max_value=32, required=False, initial=1, label="Threads at once")

    def options(self, source_job: ConversionJob | None = None) -> JobOptions:
        """The prune's :class:`JobOptions`: the dry run's rule, with or without backups."""
        data = self.cleaned_data
        return JobOptions(source_job=source_job, confirmed=True, throttle_delay_s=data["throttle_delay_s"] or 0.0,
                          max_in_flight=data["max_in_flight"] or 1, retention={"backup": not data["no_backup"]})


class ReclaimForm(forms.Form):
    """The reclaim confirmation (GET: which job it follows) and its button (POST: also ``full``, ``confirm``)."""

    source_job = forms.IntegerField(min_value=1, required=False)
    full = forms.BooleanField(required=False, label="VACUUM FULL (Postgres: returns the space to the operating "
                                                    "system, but locks each table exclusively while it runs)")
    confirm = forms.BooleanField(required=False)


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
    "rule", "keep_last", "protect", "backup", "max_delete_per_run", "dry_run", "acknowledge_branch_ambiguous"}``
    (``force_full_fleet``: ``compact`` although live full-mode processes are registered;
    ``acknowledge_branch_ambiguous``: convert sibling forks as LangGraph's reader reads them; ``rule``,
    ``keep_last``, ``protect``, ``backup``, ``max_delete_per_run``: prune kinds only, validated by
    :func:`dashboard.jobs.pruning.normalize_retention`; ``"kind": "prune", "dry_run": true`` is
    ``"kind": "prune_dry_run"``). ``{"kind": "reclaim", "confirm": true, "full", "source_job"}`` is a
    reclaim: nothing else.
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
    rule = forms.Field(required=False)
    keep_last = forms.Field(required=False)
    protect = forms.Field(required=False)
    backup = forms.Field(required=False)
    max_delete_per_run = forms.Field(required=False)
    dry_run = JsonBooleanField(required=False)
    confirm = JsonBooleanField(required=False)
    full = JsonBooleanField(required=False)
    source_job = forms.IntegerField(required=False, min_value=1)

    #: The only fields of a ``reclaim`` body besides ``kind`` (the reclaim page's fields).
    RECLAIM_FIELDS = ("confirm", "full", "source_job")

    def clean(self) -> dict[str, Any]:
        """``"kind": "prune"`` with ``"dry_run": true`` is the prune dry run; ``dry_run`` is for prune only.

        A ``reclaim`` (the whole database, never threads) takes only :data:`RECLAIM_FIELDS` and needs
        ``"confirm": true``, as its page does; the other kinds refuse those fields.
        """
        super().clean()
        data = self.cleaned_data  # what Form.clean returns (typed Optional for overrides that return None)
        kind = data.get("kind")
        if data.get("dry_run") is not None and kind not in (ConversionJob.Kind.PRUNE, ConversionJob.Kind.PRUNE_DRY_RUN):
            self.add_error("dry_run", "dry_run is for kind prune only (the other kinds have their own dry-run kind)")
        elif kind == ConversionJob.Kind.PRUNE and data.get("dry_run"):
            data["kind"] = ConversionJob.Kind.PRUNE_DRY_RUN
        if kind and kinds.get(kind).selects == kinds.Selects.DATABASE:
            self._clean_reclaim(data)
        else:
            for name in self.RECLAIM_FIELDS:
                if self.data.get(name) is not None and name not in self.errors:
                    self.add_error(name, f"{name} is for kind reclaim only")
        return data

    def _clean_reclaim(self, data: dict[str, Any]) -> None:
        for name in self.fields:
            if name != "kind" and name not in self.RECLAIM_FIELDS and self.data.get(name) not in (None, [], {}):
                self.add_error(name, f"{name} is not for kind reclaim: a reclaim vacuums the whole checkpoint "
                                     "database, it selects no thread")
        if data.get("confirm") is not True and "confirm" not in self.errors:
            self.add_error("confirm", "a reclaim needs \"confirm\": true (the reclaim page's \"I understand what "
                                      "it locks\" box): VACUUM locks the checkpoint database while it runs")

    def selection(self) -> dict[str, Any] | None:
        """The selection, or ``None`` to derive it from ``estimate_job``."""
        data = self.cleaned_data
        chosen = {k: data[k] for k in ("thread_ids", "filter", "backup_ids") if data.get(k)}
        return chosen or None

    def options(self, source_job: ConversionJob | None = None) -> JobOptions:
        """The job's :class:`JobOptions` (``source_job``: the job ``estimate_job`` names).

        Raises:
            InvalidRetention: a retention field for a kind that carries no rule.
        """
        data = self.cleaned_data
        return JobOptions(source_job=source_job, confirmed=bool(data["confirmed"]),
                          throttle_delay_s=data["throttle_delay_s"] or 0.0, max_in_flight=data["max_in_flight"] or 1,
                          integrity=data["integrity"] is not False, size_limit_bytes=data["size_limit_bytes"],
                          force_full_fleet=bool(data.get("force_full_fleet")),
                          acknowledge_branch_ambiguous=bool(data.get("acknowledge_branch_ambiguous")),
                          retention=self._retention())

    def _retention(self) -> dict[str, Any] | None:
        data = self.cleaned_data
        given = {k: data[k] for k in ("rule", "keep_last", "protect", "backup", "max_delete_per_run")
                 if data.get(k) is not None}
        if not kinds.get(data["kind"]).carries_retention:
            if given:
                raise InvalidRetention(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} only for kind "
                                       "prune_dry_run or prune.")
            return None
        return given


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


class RetentionPolicyForm(forms.ModelForm):
    """``/jobs/policies/new`` and ``/jobs/policies/<id>/``: a retention policy (off until ``enabled`` is ticked).

    The filter is the thread list's (id contains, mode, class); with ``idle_days`` and no filter the policy
    covers every idle thread, with neither every thread.
    """

    q = forms.CharField(max_length=2000, required=False, label="Thread id contains")
    mode = forms.ChoiceField(choices=_MODES, required=False)
    thread_class = forms.ChoiceField(choices=_CLASSES, required=False, label="Class")
    protect_ids = forms.CharField(max_length=100_000, required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                  label="Protected checkpoint ids (resume targets)")

    class Meta:
        model = RetentionPolicy
        fields = ["name", "enabled", "schedule", "idle_days", "rule", "keep_last", "backup", "max_delete_per_run"]
        labels = {"schedule": "Schedule (crontab, UTC: minute hour day-of-month month day-of-week)",
                  "idle_days": "Idle for at least (days)", "keep_last": "N (rule keep_last)",
                  "max_delete_per_run": "Most threads pruned or deleted per run (empty: no cap)",
                  "backup": "Back up each thread first (revertible; bytes freed once purged)"}

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            for key in ("q", "mode", "thread_class"):
                self.initial.setdefault(key, (self.instance.filter or {}).get(key) or "")
            self.initial.setdefault("protect_ids", "\n".join(self.instance.protect or []))

    def clean_schedule(self) -> str:
        """Celery's crontab must read it."""
        text = " ".join(self.cleaned_data["schedule"].split())
        try:
            parse_schedule(text)
        except InvalidSchedule as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None
        return text

    def clean_idle_days(self) -> float | None:
        """Days from 0 to :data:`MAX_IDLE_DAYS` (a span a calendar can hold), or empty."""
        days = self.cleaned_data["idle_days"]
        if days is not None and (days < 0 or days != days):
            raise forms.ValidationError("idle days must be 0 or more", code="min_value")
        if days is not None and days > MAX_IDLE_DAYS:
            raise forms.ValidationError(f"idle days must be at most {MAX_IDLE_DAYS:,} (one hundred years)",
                                        code="max_value")
        return days

    def clean(self) -> dict[str, Any]:
        """The rule as a prune job takes it (:func:`dashboard.jobs.pruning.normalize_retention`)."""
        super().clean()
        data = self.cleaned_data  # what Form.clean returns (typed Optional for overrides that return None)
        protect = [p for p in (data.get("protect_ids") or "").replace(",", " ").split() if p]
        rule = data.get("rule")
        try:
            normalized = normalize_retention({"rule": rule, "keep_last": data.get("keep_last") if rule == "keep_last"
                                              else None, "protect": protect, "backup": bool(data.get("backup")),
                                              "max_delete_per_run": data.get("max_delete_per_run")})
        except InvalidRetention as exc:
            raise forms.ValidationError(exc.detail, code="invalid") from None
        data["keep_last"] = normalized["keep_last"]
        self.instance.protect = normalized["protect"]
        self.instance.filter = {k: data.get(k) for k in ("q", "mode", "thread_class") if data.get(k)}
        return data
