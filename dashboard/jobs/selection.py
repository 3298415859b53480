"""What a job works on: a selection (JSON) resolved to thread ids or backups.

Selection shapes (stored as :attr:`ConversionJob.selection`)::

    {"thread_ids": ["a", "b"]}
    {"filter": {"mode": "delta", "thread_class": "migrated", "q": "f10",
                "updated_before": "2026-01-01T00:00:00+00:00", "updated_after": null}}
    {"backup_ids": ["20260101T000000-abcd1234"]}          # revert jobs only

A filter pages through :func:`deerflow.inventory.list_threads` (metadata
only, no delta reading, so any process may resolve it). A filter without a
mode means ``delta``: a thread without delta evidence never needs conversion.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from dashboard.jobs.errors import IdTooLong, InvalidSelection, SelectionTooLarge
from dashboard.runtime import DashboardRuntime
from deerflow import inventory
from deerflow.convert import list_backups

__all__ = ["FILTER_KEYS", "MAX_ID_LENGTH", "MAX_SELECTED_IDS", "Target", "check_request_bounds", "filter_may_match",
           "normalize", "resolve"]

FILTER_KEYS = ("mode", "thread_class", "q", "updated_before", "updated_after")
#: Ids one request may list (``thread_ids`` or ``backup_ids``); larger selections are filters.
MAX_SELECTED_IDS = 1000
#: Characters in one thread or backup id (DeerFlow's are UUIDs; backups are 64 at most).
MAX_ID_LENGTH = 1024
_PAGE = 1000

#: One unit of work: ``(thread_id, backup_id)``; ``backup_id`` is ``""`` except for reverts.
Target = tuple[str, str]


def normalize(kind: str, selection: dict[str, Any]) -> dict[str, Any]:
    """A validated copy of ``selection`` for a job of ``kind``.

    Raises:
        InvalidSelection: not exactly one of the shapes above, empty lists,
            a filter without criteria (every delta thread is ``{"mode": "delta"}``),
            bad filter values, or backup ids for a job that is not a revert.
    """
    keys = [k for k in ("thread_ids", "filter", "backup_ids") if _given(selection.get(k))]
    if len(keys) != 1:
        raise InvalidSelection("Give exactly one of thread_ids, filter (with at least one criterion) or backup_ids.")
    key = keys[0]
    if (key == "backup_ids") != (kind == "revert"):
        raise InvalidSelection("A revert job selects backups (backup_ids); other jobs select threads.")
    if key == "filter":
        return {"filter": _normalize_filter(selection["filter"])}
    return {key: _unique_strings(selection[key], key)}


def check_request_bounds(selection: dict[str, Any] | None) -> None:
    """Refuse a selection sent in a request that lists too many or too long ids.

    Only requests are bounded: a conversion derived from a dry run (or a
    revert from a conversion) takes all its source's threads.

    Raises:
        SelectionTooLarge: more than :data:`MAX_SELECTED_IDS` ids.
        IdTooLong: an id longer than :data:`MAX_ID_LENGTH` characters.
    """
    for key in ("thread_ids", "backup_ids"):
        values = (selection or {}).get(key)
        if not isinstance(values, list):
            continue
        if len(values) > MAX_SELECTED_IDS:
            raise SelectionTooLarge(f"{key} lists {len(values):,} ids; a request may list at most "
                                    f"{MAX_SELECTED_IDS:,}.")
        long = next((v for v in values if isinstance(v, str) and len(v) > MAX_ID_LENGTH), None)
        if long is not None:
            raise IdTooLong(f"{key} has an id of {len(long):,} characters (starting {long[:40]!r}); "
                            f"ids have at most {MAX_ID_LENGTH:,}.")


def _given(value: Any) -> bool:
    """A non-empty list, or a filter with at least one criterion (an empty filter is no selection)."""
    if isinstance(value, dict):
        return any(v not in (None, "") for v in value.values())
    return bool(value)


def _unique_strings(values: Any, name: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise InvalidSelection(f"{name} must be a list of non-empty strings.")
    return list(dict.fromkeys(values))


def _normalize_filter(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or set(raw) - set(FILTER_KEYS):
        raise InvalidSelection(f"filter keys are {', '.join(FILTER_KEYS)}.")
    out = {k: raw.get(k) or None for k in FILTER_KEYS}
    if out["mode"] not in (None, "full", "delta"):
        raise InvalidSelection(f"filter mode must be full or delta; got {out['mode']!r}.")
    if out["thread_class"] not in (None, *inventory.THREAD_CLASSES):
        raise InvalidSelection(f"filter thread_class must be one of {', '.join(inventory.THREAD_CLASSES)}.")
    for key in ("updated_before", "updated_after"):
        if out[key] is not None:
            out[key] = _instant(out[key], key).isoformat()
    return out


def _instant(value: Any, name: str) -> dt.datetime:
    try:
        moment = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise InvalidSelection(f"{name} must be an ISO 8601 date-time; got {value!r}.") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def resolve(rt: DashboardRuntime, selection: dict[str, Any]) -> list[Target]:
    """The targets of a normalized selection, in a stable order.

    Thread ids are taken as given (an unknown id becomes a ``not_found``
    result). Backups must exist and be active.

    Raises:
        InvalidSelection: a backup id is unknown, restored or purged.
    """
    if "thread_ids" in selection:
        return [(t, "") for t in selection["thread_ids"]]
    if "filter" in selection:
        return [(t, "") for t in _filtered(rt, selection["filter"])]
    return _backups(rt, selection["backup_ids"])


def _filtered(rt: DashboardRuntime, f: dict[str, Any]) -> list[str]:
    return [t for page, _ in _filter_pages(rt, f) for t in page]


def filter_may_match(rt: DashboardRuntime, f: dict[str, Any]) -> bool:
    """False only when the filter surely matches no thread; reads one page at most (bounded, for a request).

    A job with a filter selection resolves the filter in a worker (:mod:`dashboard.jobs.resolving`); the request
    only refuses a filter whose first page is also its last and holds no match.
    """
    page, more = next(_filter_pages(rt, f))
    return bool(page) or more


def _filter_pages(rt: DashboardRuntime, f: dict[str, Any]):
    """Yields ``(matching thread ids of one page of at most 1000 threads, whether more pages follow)``."""
    before = _instant(f["updated_before"], "updated_before") if f.get("updated_before") else None
    after = _instant(f["updated_after"], "updated_after") if f.get("updated_after") else None
    cursor = None
    while True:
        page, cursor = inventory.list_threads(rt.saver, limit=_PAGE, cursor=cursor, mode=f.get("mode") or "delta",
                                              thread_class=f.get("thread_class"), q=f.get("q"))
        yield ([t.thread_id for t in page
                if (before is None or (t.updated_at and t.updated_at < before))
                and (after is None or (t.updated_at and t.updated_at > after))], cursor is not None)
        if cursor is None:
            return


def _backups(rt: DashboardRuntime, backup_ids: list[str]) -> list[Target]:
    known = {b.backup_id: b for b in list_backups(rt.config.database)}
    bad = [b for b in backup_ids if b not in known or known[b].status != "active"]
    if bad:
        raise InvalidSelection(f"Not an active backup: {', '.join(bad)}.",
                               hint="Only active backups can be restored; see the backups page.")
    return [(known[b].thread_id, b) for b in backup_ids]
