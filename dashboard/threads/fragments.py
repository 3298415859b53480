"""Keys for the template fragments the hot pages cache (Django's ``{% cache %}`` tag, the default cache).

Rendering dominates the list and thread pages (most of a
request's time), and their biggest parts are pure functions
of data the view already holds. A fragment is cached under a digest of
everything its HTML is drawn from, so a changed input is a new key, never
stale HTML: there is nothing to invalidate, and entries expire after
:data:`FRAGMENT_TTL_S`. The cache is per process (``LocMemCache``, Django's
default) unless ``CACHES`` says otherwise.
"""

from __future__ import annotations

import hashlib
import pickle
from typing import Any

__all__ = ["FRAGMENT_TTL_S", "fragment_key", "history_rows_key", "message_items_key", "message_section_key",
           "thread_rows_key"]

#: Seconds a cached fragment lives (its key already changes with its inputs; this bounds memory).
FRAGMENT_TTL_S = 600


def fragment_key(*parts: Any) -> str:
    """A SHA-256 hex digest of ``parts``: of their pickle, or of their ``repr`` when they do not pickle.

    A pickle holds everything needed to rebuild the parts (every field, with its type), so different
    parts never share a key; it is several times cheaper to produce than ``repr`` of a page of messages.
    Parts that do not pickle (a local class, a lock) are digested by ``repr``, which must then show all they
    render from. The two encodings are digested under different prefixes. Equal parts may pickle differently
    (an object referenced twice, a set's order): that is a cache miss, never wrong HTML.
    """
    try:
        data = b"p" + pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # anything unpicklable falls back to repr
        data = b"r" + repr(parts).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def thread_rows_key(process_mode: str | None, threads: list[Any]) -> str:
    """Key of the list's rows: the process's mode (it marks refused rows) and every field of every row.

    Args:
        process_mode: the frozen ``checkpoint_channel_mode`` (``None`` before start-up).
        threads: the page's :class:`deerflow.inventory.ThreadSummary` rows (dataclasses: ``repr`` lists
            every field).
    """
    return fragment_key("thread-rows", process_mode, threads)


def message_items_key(database: Any, thread_id: str, checkpoint_ns: str, checkpoint_id: str, mpage: Any) -> str:
    """Key of a page of message items: where they were read, and what each item draws.

    Args:
        database: the runtime's ``database:`` block (which store the checkpoint came from).
        thread_id, checkpoint_ns, checkpoint_id: the checkpoint (its links are drawn from them).
        mpage: the :class:`dashboard.threads.messages.MessagePage`; everything its items are drawn from
            enters the key, so two checkpoints that happen to share an id but not content never share HTML:
            for an unfiltered page, its groups (message positions) and every field of each message an item
            reads (:func:`_message_parts`), so a cached page never builds its items; for a search, every
            shown field of every hit.
    """
    if mpage.hits is None:
        drawn: list[Any] = [(group, [_message_parts(mpage.messages[i]) for i in group]) for group in mpage.groups]
    else:
        drawn = [_item_parts(item) for item in mpage.hits]
    return fragment_key("message-items", database, thread_id, checkpoint_ns, checkpoint_id, mpage.q, mpage.role,
                        drawn)


def message_section_key(items_key: str, mpage: Any, page_form: Any) -> str:
    """Key of the whole message section (search form, count line, items, pager) around its items.

    Args:
        items_key: :func:`message_items_key` of the section's items (the database, thread, namespace,
            checkpoint, search and every drawn field of the items: the links and hidden fields are drawn
            from the same thread, namespace and checkpoint).
        mpage: the :class:`dashboard.threads.messages.MessagePage` (its counts and page numbers are drawn).
        page_form: the bound, valid :class:`dashboard.threads.forms.ThreadPageForm`: its ``q`` and ``role``
            widgets are drawn from their bound values.
    """
    return fragment_key("message-section", items_key, page_form["q"].value(), page_form["role"].value(),
                        mpage.total, mpage.matched, mpage.page, mpage.pages, mpage.first, mpage.last, mpage.q,
                        mpage.role)


def history_rows_key(database: Any, thread_id: str, checkpoint_ns: str, tree: list[Any], lanes_after: Any,
                     next_before: str | None) -> str:
    """Key of a history page's table and its "older" link: where it was read and every drawn field.

    Args:
        database: the runtime's ``database:`` block (which store the rows came from).
        thread_id, checkpoint_ns: the namespace (the links are drawn from them).
        tree: the :class:`dashboard.threads.tree.TreeRow` list (frozen dataclasses holding their
            :class:`dashboard.threads.services.CheckpointRow`: ``repr`` lists every field).
        lanes_after, next_before: what the "older checkpoints" link carries.

    A page with prune marks is not cached (its marks come from a job record); the view passes no key then.
    """
    return fragment_key("history-rows", database, thread_id, checkpoint_ns, tree, lanes_after, next_before)


def _message_parts(message: Any) -> tuple[Any, ...]:
    """What a message's item is drawn from: its class and its instance fields (all of them).

    :func:`dashboard.threads.messages.message_item` and the item template read the content, tool calls,
    type, name, id and answered tool call, all fields of a LangChain message (``__dict__`` of a pydantic
    model), so equal parts draw equal items. An object without ``__dict__`` enters whole (its ``repr``).
    """
    fields = getattr(message, "__dict__", None)
    return (type(message).__module__, type(message).__qualname__, fields if isinstance(fields, dict) else message)


def _item_parts(item: Any) -> tuple[Any, ...]:
    message = item.message
    return (item.index, item.role, item.first_line, item.size, item.preview, item.hidden_chars, item.calls,
            item.blocks, getattr(item, "snippet", None), getattr(item, "context_page", None),
            getattr(message, "name", None), getattr(message, "id", None), getattr(message, "tool_call_id", None),
            [_item_parts(result) for result in item.results])
