"""Template helpers for rendering messages. Everything they return is escaped by the template engine."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from django import template

from dashboard.threads import fragments, links
from dashboard.threads.jsonify import jsonable

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """``value`` as indented JSON text (to be auto-escaped by the template)."""
    return json.dumps(jsonable(value), indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def content_parts(content: Any) -> list[dict[str, str]]:
    """A message's content as ``[{"kind": "text"|"block", "text": ...}]`` for display."""
    if isinstance(content, str):
        return [{"kind": "text", "text": content}]
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append({"kind": "text", "text": block["text"]})
        else:
            parts.append({"kind": "block", "text": pretty_json(block)})
    return parts


@register.filter
def role(message: Any) -> str:
    """``human``, ``ai``, ``tool``, ``system`` or the message's type."""
    return getattr(message, "type", "unknown")


@register.filter
def short_id(value: str | None) -> str:
    """The last 12 characters of an id, for compact tables."""
    if not value:
        return ""
    return value if len(value) <= 14 else "…" + value[-12:]


@register.simple_tag
def thread_url(name: str, thread_id: str, **query: str | None) -> str:
    """``{% thread_url "threads:detail" thread_id checkpoint_id=... %}``: see :mod:`dashboard.threads.links`."""
    return links.thread_url(name, thread_id, **query)


@register.simple_tag
def messages_url(thread_id: str, checkpoint_id: str, checkpoint_ns: str, mpage: Any = None, page: int | None = None,
                 **extra: Any) -> str:
    """The thread page at ``checkpoint_id`` with ``mpage``'s search (``q``, ``role``) and message page ``page``."""
    query: dict[str, str | None] = {"checkpoint_id": checkpoint_id, "checkpoint_ns": checkpoint_ns or None}
    if mpage is not None:
        query.update(q=mpage.q or None, role=mpage.role or None)
    if page and page > 1:
        query["page"] = str(page)
    query.update({k: None if v is None else str(v) for k, v in extra.items()})
    return links.thread_url("threads:detail", thread_id, **query)


@register.simple_tag
def thread_form(name: str, thread_id: str) -> dict[str, Any]:
    """``{"path", "hidden": [(name, value)]}`` for a GET form to route ``name``: a GET form drops its action's
    query string, so the ``thread_id`` of a dot-segment id (see :mod:`dashboard.threads.links`) travels hidden."""
    url = links.thread_url(name, thread_id)
    path, _, query = url.partition("?")
    return {"path": path, "hidden": parse_qsl(query, keep_blank_values=True)}


#: Nav section of each route (``namespace:name`` or name); routes not listed belong to none.
_SECTIONS = {"threads": "threads", "thread-history": "threads", "thread-detail-by-query": "threads",
             "thread-history-by-query": "threads", "jobs:backups": "backups", "jobs": "jobs", "audit": "audit",
             "tokens": "tokens"}


@register.simple_tag(takes_context=True)
def nav_section(context: Any) -> str:
    """The nav item of the page being rendered (``threads``, ``jobs``, ``backups``, ``audit``, ``tokens`` or "")."""
    match = getattr(context.get("request"), "resolver_match", None)
    if match is None:
        return ""
    return _SECTIONS.get(match.view_name) or _SECTIONS.get(match.namespace) or ""


#: Thread class -> (words, what it means). Raw class names stay in ``data-class`` and the filters.
CLASS_WORDS = {
    "full": ("full", "No checkpoint carries delta evidence: every checkpoint stores the whole message list."),
    "delta": ("delta", "DeerFlow-marked delta thread: per-step writes plus a _DeltaSnapshot every "
                       "snapshot_frequency updates."),
    "delta_counters_only": ("delta, counters only", "Delta by LangGraph's counters_since_delta_snapshot alone "
                            "(no DeerFlow marker anywhere): written by plain LangGraph, not by DeerFlow."),
    "migrated": ("migrated full → delta", "A delta head over older full-mode checkpoints: the supported "
                 "full → delta migration."),
    "inconsistent": ("inconsistent", "A head that looks full over delta ancestors: a full-mode write onto a delta "
                     "thread, or a marker-less delta thread whose head is a snapshot checkpoint. Read it in "
                     "delta mode; converting it to full makes it consistent."),
}


@register.filter
def class_words(thread_class: str) -> str:
    """A thread class in words (``delta_counters_only`` -> ``delta, counters only``)."""
    return CLASS_WORDS.get(thread_class, (str(thread_class).replace("_", " "), ""))[0]


@register.filter
def class_help(thread_class: str) -> str:
    """What a thread class means (a tooltip and the list's glossary)."""
    return CLASS_WORDS.get(thread_class, ("", ""))[1]


@register.simple_tag
def class_glossary() -> list[tuple[str, str, str]]:
    """``(class, words, meaning)`` of every thread class, for the list's glossary."""
    return [(name, words, meaning) for name, (words, meaning) in CLASS_WORDS.items()]


@register.simple_tag(takes_context=True)
def thread_rows_key(context: Any) -> str:
    """The cache key of the list's rows, from the context's ``threads`` and ``process_mode``."""
    return fragments.thread_rows_key(context.get("process_mode"), list(context.get("threads") or []))


@register.simple_tag(takes_context=True)
def message_items_key(context: Any) -> str:
    """The cache key of a page of message items, from the context's ``state``, ``checkpoint_ns`` and ``mpage``.

    The database comes from the running process (``None`` before start-up); see
    :func:`dashboard.threads.fragments.message_items_key`.
    """
    from dashboard.runtime import _runtime_if_started

    rt = _runtime_if_started()
    state = context["state"]
    return fragments.message_items_key(rt.config.database if rt else None, state.thread_id,
                                       context.get("checkpoint_ns") or "", state.checkpoint_id, context["mpage"])


@register.simple_tag(takes_context=True)
def message_section_key(context: Any, items_key: str) -> str:
    """The cache key of the whole message section (see :func:`dashboard.threads.fragments.message_section_key`)."""
    return fragments.message_section_key(items_key, context["mpage"], context["page_form"])


@register.simple_tag
def fragment_ttl() -> int:
    """Seconds a cached page fragment lives (:data:`dashboard.threads.fragments.FRAGMENT_TTL_S`)."""
    return fragments.FRAGMENT_TTL_S
@register.filter
def mark_of(marks: dict[str, Any] | None, checkpoint_id: str) -> dict[str, Any] | None:
    """A prune job's mark of one checkpoint (:func:`dashboard.jobs.pruning.checkpoint_marks`), or ``None``."""
    return (marks or {}).get(checkpoint_id)
