"""What a job works on: a selection (JSON) resolved to thread ids or backups.

Selection shapes (stored as :attr:`ConversionJob.selection`)::

    {"thread_ids": ["a", "b"]}
    {"filter": {"mode": "delta", "thread_class": "migrated", "q": "f10", "owner": "alice",
                "updated_before": "2026-01-01T00:00:00+00:00", "updated_after": null}}
    {"backup_ids": ["20260101T000000-abcd1234"]}          # revert jobs only

A filter pages through :func:`deerflow.inventory.list_threads` (metadata
only, no delta reading, so any process may resolve it). A filter without a
mode means ``delta``: a thread without delta evidence never needs conversion.
Prune jobs (``prune_dry_run``, ``prune``) also take ``"mode": "any"`` (what
their filter without a mode means: retention concerns both modes) and
``"idle_days": D`` (threads whose newest checkpoint is older than D days,
:func:`deerflow.retention.select_threads`). ``q`` matches DeerFlow titles as well as ids and ``owner``
DeerFlow's ``threads_meta.user_id``, as on the list; ``"thread_class": "orphaned"`` selects the list's
orphans, confirmed against LangGraph's own ``checkpoints`` when resolved
(:func:`deerflow.inventory.deerflow_tables.orphaned_thread_ids`: no stale summary row decides a deletion).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings

from dashboard.errors.jobs import IdTooLong, InvalidSelection, SelectionTooLarge, UnknownThreads
from dashboard.jobs import kinds
from dashboard.runtime import DashboardRuntime
from deerflow import inventory
from deerflow.convert import list_backups
from deerflow.inventory import deerflow_tables
from deerflow.retention import select_threads
from deerflow.storage import has_sql_tables, reader_for

__all__ = ["FILTER_KEYS", "MAX_ID_LENGTH", "MAX_SELECTED_IDS", "Target", "check_request_bounds", "check_threads_exist",
           "filter_may_match", "missing_threads", "normalize", "resolve"]

FILTER_KEYS = ("mode", "thread_class", "q", "owner", "updated_before", "updated_after")
#: The filter keys of prune jobs: :data:`FILTER_KEYS` and ``idle_days``.
PRUNE_FILTER_KEYS = (*FILTER_KEYS, "idle_days")
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
    selects = kinds.get(kind).selects
    if (key == "backup_ids") != (selects == kinds.Selects.BACKUPS):
        raise InvalidSelection("A revert job selects backups (backup_ids); other jobs select threads.")
    if key == "filter":
        return {"filter": _normalize_filter(selection["filter"], prune=selects == kinds.Selects.ANY_THREADS)}
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


def _normalize_filter(raw: Any, *, prune: bool = False) -> dict[str, Any]:
    keys = PRUNE_FILTER_KEYS if prune else FILTER_KEYS
    if not isinstance(raw, dict) or set(raw) - set(keys):
        raise InvalidSelection(f"filter keys are {', '.join(keys)}.")
    out = {k: raw.get(k) if k == "idle_days" else raw.get(k) or None for k in keys}
    modes = (None, "full", "delta", "any") if prune else (None, "full", "delta")
    if out["mode"] not in modes:
        raise InvalidSelection(f"filter mode must be {' or '.join(m for m in modes if m)}; got {out['mode']!r}.")
    if prune:
        out["mode"] = out["mode"] or "any"
        days = out["idle_days"]
        if days is not None and (isinstance(days, bool) or not isinstance(days, int | float) or days != days
                                 or days < 0):
            raise InvalidSelection(f"filter idle_days must be a number of days >= 0; got {days!r}.")
    if out["thread_class"] not in (None, *inventory.LIST_CLASSES):
        raise InvalidSelection(f"filter thread_class must be one of {', '.join(inventory.LIST_CLASSES)}.")
    if out["owner"] is None:
        del out["owner"]  # stored only when given: a filter without it is stored as before owners existed
    else:
        problem = "not a string" if not isinstance(out["owner"], str) else _owner_problem(out["owner"])
        if problem:
            raise InvalidSelection(f"filter owner must be DeerFlow's user id (a string of 1 to "
                                   f"{deerflow_tables.MAX_OWNER_LENGTH} characters): {problem}.")
    for key in ("updated_before", "updated_after"):
        if out[key] is not None:
            out[key] = _instant(out[key], key).isoformat()
    return out


def _owner_problem(owner: str) -> str | None:
    try:
        deerflow_tables.validate_owner(owner)
    except ValueError as exc:
        return str(exc)
    return None


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


#: Ids per ``IN (...)`` of :func:`missing_threads` (below SQLite's bound on host parameters).
_IN_CHUNK = 500
#: Missing ids named in the error before it says how many more there are.
_NAMED = 20


def missing_threads(rt: DashboardRuntime, thread_ids: list[str]) -> list[str]:
    """The ids among ``thread_ids`` that have no checkpoint in the checkpoint database, in the given order.

    One indexed ``SELECT DISTINCT thread_id ... WHERE thread_id IN (...)`` per 500 ids on LangGraph's
    ``checkpoints`` table (its primary key starts with ``thread_id``); a saver without SQL tables is asked
    for each thread's newest checkpoint.
    """
    if not thread_ids:
        return []
    if not has_sql_tables(rt.saver):
        return [t for t in thread_ids if rt.saver.get_tuple({"configurable": {"thread_id": t}}) is None]
    reader, found = reader_for(rt.saver), set()
    for i in range(0, len(thread_ids), _IN_CHUNK):
        chunk = thread_ids[i:i + _IN_CHUNK]
        rows = reader.query("SELECT DISTINCT thread_id FROM checkpoints "
                            f"WHERE thread_id IN ({','.join('?' * len(chunk))})", chunk)
        found.update(r["thread_id"] for r in rows)
    return [t for t in thread_ids if t not in found]


def check_threads_exist(rt: DashboardRuntime, thread_ids: list[str]) -> None:
    """Refuse a request that names threads the checkpoint database does not hold.

    Raises:
        InvalidSelection: code ``unknown_threads``, naming the missing ids (the first 20, then how many more).
    """
    missing = missing_threads(rt, thread_ids)
    if missing:
        named = ", ".join(missing[:_NAMED]) + (f" … ({len(missing) - _NAMED} more)" if len(missing) > _NAMED else "")
        raise UnknownThreads(f"No such thread{'s' if len(missing) > 1 else ''} in the checkpoint database: {named}.")


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
    """Yields ``(matching thread ids of one page of at most 1000 threads, whether more pages follow)``.

    ``mode`` ``"any"`` lists both modes (prune filters); ``idle_days`` keeps threads whose newest checkpoint
    is older than that many days (:func:`deerflow.retention.select_threads`).
    """
    idle = None
    if f.get("idle_days") is not None:
        idle = set(select_threads(rt.config.database, idle_days=float(f["idle_days"])))
    mode = None if f.get("mode") == "any" else f.get("mode") or "delta"
    before = _instant(f["updated_before"], "updated_before") if f.get("updated_before") else None
    after = _instant(f["updated_after"], "updated_after") if f.get("updated_after") else None
    orphan_age = settings.DASHBOARD_ORPHAN_MIN_IDLE_S
    if f.get("thread_class") == inventory.ORPHANED:
        idle = _orphans(rt, orphan_age) if idle is None else idle & _orphans(rt, orphan_age)
    cursor = None
    while True:
        page, cursor = inventory.list_threads(rt.saver, limit=_PAGE, cursor=cursor, mode=mode,
                                              thread_class=f.get("thread_class"), q=f.get("q"),
                                              owner=f.get("owner"), orphan_min_idle_s=orphan_age)
        yield ([t.thread_id for t in page
                if (idle is None or t.thread_id in idle)
                and (before is None or (t.updated_at and t.updated_at < before))
                and (after is None or (t.updated_at and t.updated_at > after))], cursor is not None)
        if cursor is None:
            return


def _orphans(rt: DashboardRuntime, min_idle_s: float) -> set[str]:
    """The orphans idle ``min_idle_s`` seconds, from LangGraph's ``checkpoints`` now (not the summary)."""
    reader = reader_for(rt.saver)
    return set(deerflow_tables.orphaned_thread_ids(reader, deerflow_tables.orphan_floor(min_idle_s)))


def _backups(rt: DashboardRuntime, backup_ids: list[str]) -> list[Target]:
    known = {b.backup_id: b for b in list_backups(rt.config.database)}
    bad = [b for b in backup_ids if b not in known or known[b].status != "active"]
    if bad:
        raise InvalidSelection(f"Not an active backup: {', '.join(bad)}.",
                               hint="Only active backups can be restored; see the backups page.")
    return [(known[b].thread_id, b) for b in backup_ids]
