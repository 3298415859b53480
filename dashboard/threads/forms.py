"""Query-parameter validation for the thread pages and API (Django forms)."""

from __future__ import annotations

from django import forms

from deerflow.inventory import SORTS, THREAD_CLASSES

SORT_LABELS = {"updated": "last update", "checkpoints": "checkpoint count", "bytes": "size (heaviest first)"}


class ThreadListForm(forms.Form):
    """``/threads/`` and ``/api/threads``: filters, sort order and keyset pagination."""

    limit = forms.IntegerField(min_value=1, max_value=1000, required=False)
    cursor = forms.CharField(max_length=4096, required=False)
    mode = forms.ChoiceField(choices=[("", "any"), ("full", "full"), ("delta", "delta")], required=False)
    thread_class = forms.ChoiceField(choices=[("", "any")] + [(c, c) for c in THREAD_CLASSES], required=False)
    q = forms.CharField(max_length=2000, required=False, strip=True)
    sort = forms.ChoiceField(choices=[(s, SORT_LABELS[s]) for s in SORTS], required=False)

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
