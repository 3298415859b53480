"""Query-parameter validation for the thread pages and API (Django forms)."""

from __future__ import annotations

from django import forms

from deerflow.inventory import LIST_CLASSES, SORTS
from deerflow.storage.deerflow_tables import MAX_OWNER_LENGTH, validate_owner

SORT_LABELS = {"updated": "last update", "checkpoints": "checkpoint count", "bytes": "size (heaviest first)"}


class ThreadListForm(forms.Form):
    """``/threads/`` and ``/api/threads``: filters, sort order and keyset pagination."""

    limit = forms.IntegerField(min_value=1, max_value=1000, required=False)
    cursor = forms.CharField(max_length=4096, required=False)
    mode = forms.ChoiceField(choices=[("", "any"), ("full", "full"), ("delta", "delta")], required=False)
    thread_class = forms.ChoiceField(choices=[("", "any")] + [(c, c) for c in LIST_CLASSES], required=False)
    q = forms.CharField(max_length=2000, required=False, strip=True)
    sort = forms.ChoiceField(choices=[(s, SORT_LABELS[s]) for s in SORTS], required=False)
    #: DeerFlow's owner (``threads_meta.user_id``), exactly.
    owner = forms.CharField(max_length=MAX_OWNER_LENGTH, required=False, strip=True)

    def clean_owner(self) -> str:
        owner = self.cleaned_data.get("owner") or ""
        if owner:
            try:
                validate_owner(owner)
            except ValueError as exc:
                raise forms.ValidationError(f"{exc}.") from None
        return owner

    def filters(self, default_limit: int) -> dict:
        """Keyword arguments for :func:`deerflow.inventory.list_threads`."""
        data = self.cleaned_data
        return {
            "limit": data.get("limit") or default_limit,
            "cursor": data.get("cursor") or None,
            "mode": data.get("mode") or None,
            "thread_class": data.get("thread_class") or None,
            "q": data.get("q") or None,
            "sort": data.get("sort") or "updated",
            "owner": data.get("owner") or None,
        }


class StateQueryForm(forms.Form):
    """``/api/threads/<id>/state`` and the thread page: which checkpoint."""

    checkpoint_id = forms.CharField(max_length=200, required=False)
    checkpoint_ns = forms.CharField(max_length=2000, required=False, strip=False)


class HistoryQueryForm(forms.Form):
    """``/api/threads/<id>/history``: page size, keyset position, namespace."""

    limit = forms.IntegerField(min_value=1, max_value=500, required=False)
    before = forms.CharField(max_length=200, required=False)
    checkpoint_ns = forms.CharField(max_length=2000, required=False, strip=False)


class ThreadIdForm(forms.Form):
    """``/thread/?thread_id=`` and ``/history/?thread_id=``: ids that cannot travel as a URL path."""

    thread_id = forms.CharField(max_length=2000, strip=False)


class ThreadPageForm(forms.Form):
    """The thread page's own parameters (beside :class:`StateQueryForm`'s checkpoint).

    ``view``: "" the page, ``json`` the materialized state as JSON (``download=1``: as a file),
    ``message`` one message whole (``index``; ``download=1``: its text as a file), ``diff``
    the changes from checkpoint ``base`` to the chosen one. ``q``/``role``/``page`` search and page the messages.
    """

    VIEWS = [("", "page"), ("json", "state as JSON"), ("message", "one message"), ("diff", "diff")]
    ROLES = [("", "any role"), ("human", "human"), ("ai", "ai"), ("tool", "tool"), ("system", "system")]

    view = forms.ChoiceField(choices=VIEWS, required=False)
    download = forms.BooleanField(required=False)
    index = forms.IntegerField(min_value=0, required=False)
    q = forms.CharField(max_length=200, required=False, strip=True, label="Find in messages")
    role = forms.ChoiceField(choices=ROLES, required=False)
    page = forms.IntegerField(min_value=1, max_value=1_000_000, required=False)
    base = forms.CharField(max_length=200, required=False)
    #: Draw the history tree with this prune job's kept/deleted/protected marks.
    prune_job = forms.IntegerField(min_value=1, max_value=2**31 - 1, required=False)

    def clean(self):
        data = super().clean()
        if data.get("view") == "message" and data.get("index") is None:
            raise forms.ValidationError("view=message needs index=<position of the message, from 0>.")
        if data.get("view") == "diff" and not data.get("base"):
            raise forms.ValidationError("view=diff needs base=<checkpoint_id to compare from>.")
        return data


class HistoryPageForm(HistoryQueryForm):
    """The history fragment: :class:`HistoryQueryForm` plus the tree's open branches from the page above."""

    lanes = forms.CharField(max_length=4000, required=False)
    #: Mark each row kept / deleted / protected as this prune job (dry run or prune) decided.
    prune_job = forms.IntegerField(min_value=1, max_value=2**31 - 1, required=False)
