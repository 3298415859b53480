"""The thread page's message list: one line per message, tool calls grouped with their results, search, paging.

Pages of a thread with a thousand messages must stay small, so the page
never carries a whole conversation: messages are shown a page at a time
(:data:`PAGE_SIZE` messages, never splitting a tool call from its results),
each collapsed to one line (role, name, first line, size) with a body
preview of at most :data:`PREVIEW_CHARS` characters; the rest is one click
away (the message's own page, or a download).

Grouping keeps the materialized order: an AI message with tool calls takes
the tool messages that *immediately follow it* and answer one of its calls
(``tool_call_id``) as its results. Nothing is moved, so the order on the
page is always the order of ``values["messages"]``.

Everything here returns plain text; the template engine escapes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from dashboard.threads.jsonify import jsonable

__all__ = ["PAGE_SIZE", "PREVIEW_CHARS", "MessageItem", "MessagePage", "message_item", "message_page",
           "message_text"]

#: Messages per page (a group of a tool call and its results is never split, so a page may run a little over).
PAGE_SIZE = 100
#: Characters of a message body shown inline; longer bodies end with "show all" and "download".
PREVIEW_CHARS = 2000
#: Characters of the one-line summary.
LINE_CHARS = 140
#: Characters of context either side of a search hit in the summary line.
SNIPPET_CONTEXT = 60


def message_text(message: Any) -> str:
    """A message's content as plain text: a string as is, content blocks' text joined, other blocks as JSON."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(json.dumps(jsonable(block), indent=2, ensure_ascii=False, sort_keys=True))
    return "\n\n".join(parts)


def _calls(message: Any) -> list[dict[str, Any]]:
    out = []
    for call in getattr(message, "tool_calls", None) or []:
        args = json.dumps(jsonable(call.get("args")), indent=2, ensure_ascii=False, sort_keys=True)
        out.append({"name": call.get("name") or "", "id": call.get("id") or "", "args": args})
    return out


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…"


@dataclass
class MessageItem:
    """One message as the page shows it.

    Attributes:
        index: position in ``values["messages"]`` (0-based).
        message: the message object (for ``id``, ``type``, ``name``).
        role: ``human``, ``ai``, ``tool``, ``system``, ...
        first_line: first non-blank line, at most :data:`LINE_CHARS` characters.
        size: UTF-8 bytes of the text plus the tool calls' arguments.
        preview: the body, cut at :data:`PREVIEW_CHARS` characters.
        hidden_chars: characters cut from ``preview`` (0: the body is whole).
        calls: ``[{"name", "id", "args"}]`` with the arguments as indented JSON.
        results: the tool messages grouped under this AI message.
        snippet: ``(before, hit, after)`` around the first search hit, or ``None``.
        context_page: for a search hit, the page of the unfiltered list that holds it.
    """

    index: int
    message: Any
    role: str
    first_line: str
    size: int
    preview: str
    hidden_chars: int
    calls: list[dict[str, Any]]
    results: list[MessageItem] = field(default_factory=list)
    snippet: tuple[str, str, str] | None = None
    context_page: int | None = None

    @property
    def blocks(self) -> bool:
        """Whether the content is a list of content blocks (shown preformatted)."""
        return not isinstance(getattr(self.message, "content", ""), str)


def message_item(index: int, message: Any) -> MessageItem:
    """The :class:`MessageItem` of ``message`` at ``index``."""
    text = message_text(message)
    calls = _calls(message)
    size = len(text.encode("utf-8")) + sum(len(c["args"].encode("utf-8")) for c in calls)
    first = _first_line(text) or (", ".join(f"→ {c['name']}" for c in calls))
    return MessageItem(index=index, message=message, role=getattr(message, "type", "unknown"), first_line=first,
                       size=size, preview=text[:PREVIEW_CHARS], hidden_chars=max(0, len(text) - PREVIEW_CHARS),
                       calls=calls)


#: Message classes -> whether the class itself has a ``tool_calls`` attribute (a property, say).
_CLASS_TOOL_CALLS: dict[type, bool] = {}


def _tool_calls(message: Any) -> Any:
    """``getattr(message, "tool_calls", None)``, without pydantic's slow path for a missing attribute.

    A human, system or tool message has no ``tool_calls``; asking a pydantic model for a missing attribute
    goes through its ``__getattr__`` and an exception (~3 µs, most of the grouping of a long thread). The
    lookup is the same: an attribute of the class wins (plain ``getattr``), then the instance's fields, then
    pydantic's extra fields (LangChain messages allow them), else ``getattr``.
    """
    cls = type(message)
    on_class = _CLASS_TOOL_CALLS.get(cls)
    if on_class is None:
        on_class = _CLASS_TOOL_CALLS[cls] = hasattr(cls, "tool_calls")
    if not on_class:
        fields = getattr(message, "__dict__", None)
        if isinstance(fields, dict) and "tool_calls" in fields:
            return fields["tool_calls"]
        extra = getattr(message, "__pydantic_extra__", None)
        if isinstance(extra, dict):
            return extra.get("tool_calls")
    return getattr(message, "tool_calls", None)


def _call_ids(message: Any) -> set[str]:
    """The non-empty ids of the message's tool calls (the ids :func:`_calls` lists, without formatting arguments)."""
    return {call.get("id") or "" for call in _tool_calls(message) or []} - {""}


def _index_groups(messages: list[Any]) -> list[list[int]]:
    """Top-level groups as message positions: an AI message and the tool results that immediately follow
    and answer it. The grouping rule of :func:`_groups`, read from roles and ids alone (no item built)."""
    groups: list[list[int]] = []
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        role = getattr(message, "type", "unknown")
        if role == "tool" and groups and getattr(message, "tool_call_id", None) in open_calls:
            groups[-1].append(index)
            continue
        groups.append([index])
        open_calls = _call_ids(message)
    return groups


def _group_item(messages: list[Any], group: list[int]) -> MessageItem:
    item = message_item(group[0], messages[group[0]])
    item.results = [message_item(i, messages[i]) for i in group[1:]]
    return item


def _groups(messages: list[Any]) -> list[MessageItem]:
    """Top-level items, each AI message holding the tool results that immediately follow and answer it."""
    return [_group_item(messages, group) for group in _index_groups(messages)]


def _matches(item: MessageItem, message: Any, needle: str) -> tuple[str, str, str] | None:
    """``(before, hit, after)`` of the first case-insensitive hit of ``needle`` in the message, else ``None``."""
    haystacks = [message_text(message), getattr(message, "name", None) or ""]
    haystacks += [f"{c['name']} {c['args']}" for c in item.calls]
    for text in haystacks:
        at = text.casefold().find(needle)
        if at >= 0 and len(text.casefold()) == len(text):
            end = at + len(needle)
            before = text[max(0, at - SNIPPET_CONTEXT):at].replace("\n", " ")
            after = text[end:end + SNIPPET_CONTEXT].replace("\n", " ")
            return ("…" if at > SNIPPET_CONTEXT else "") + before, text[at:end], after
        if at >= 0:  # case folding changed the length (e.g. "ß"): no exact span, show the line
            return "", "", _first_line(text)
    return None


@dataclass
class MessagePage:
    """One page of the message list.

    Attributes:
        total: messages in the checkpoint.
        matched: messages matching ``q`` / ``role`` (``total`` without a filter).
        page, pages: this page's number and the page count (1-based; at least 1).
        first, last: 1-based positions of the page's first and last message among the ``matched`` (0 when empty).
        q, role: the filter applied ("" when none).
        hits: a filtered page's items (built), else ``None``.
        messages: the checkpoint's messages (an unfiltered page builds its items from them).
        groups: an unfiltered page's top-level groups as message positions (an AI message and its results).

    :attr:`items` are the page's top-level items; an unfiltered page builds them on first use
    only, so a page whose rendered items come from the fragment cache never builds them.
    """

    total: int
    matched: int
    page: int
    pages: int
    first: int
    last: int
    q: str
    role: str
    hits: list[MessageItem] | None = None
    messages: list[Any] = field(default_factory=list, repr=False)
    groups: list[list[int]] = field(default_factory=list)

    @cached_property
    def items(self) -> list[MessageItem]:
        """Top-level items on this page, with grouped results inside."""
        if self.hits is not None:
            return self.hits
        return [_group_item(self.messages, group) for group in self.groups]

    @property
    def filtered(self) -> bool:
        return bool(self.q or self.role)

    @property
    def shown(self) -> int:
        return self.last - self.first + 1 if self.first else 0


def _paginate(items: list[MessageItem], page_size: int) -> list[list[MessageItem]]:
    pages: list[list[MessageItem]] = [[]]
    count = 0
    for item in items:
        if count >= page_size:
            pages.append([])
            count = 0
        pages[-1].append(item)
        count += 1 + len(item.results)
    return pages


def _paginate_groups(groups: list[list[int]], page_size: int) -> list[list[list[int]]]:
    """:func:`_paginate` of index groups (a group counts its messages; never split)."""
    pages: list[list[list[int]]] = [[]]
    count = 0
    for group in groups:
        if count >= page_size:
            pages.append([])
            count = 0
        pages[-1].append(group)
        count += len(group)
    return pages


def _flatten_count(items: list[MessageItem]) -> int:
    return sum(1 + len(i.results) for i in items)


def message_page(messages: list[Any], *, page: int = 1, q: str = "", role: str = "",
                 page_size: int = PAGE_SIZE) -> MessagePage:
    """Page ``page`` of ``messages``, grouped, or of the messages matching ``q`` (any case) and ``role``.

    Args:
        messages: the materialized ``values["messages"]`` list.
        page: 1-based page number; past the end it is the last page.
        q: text to find in content, name or tool calls (case-insensitive); "" for none.
        role: a message type to keep (``human``, ``ai``, ``tool``, ``system``); "" for all.
        page_size: messages per page (count).

    Returns:
        A :class:`MessagePage`. A search lists hits one by one (ungrouped), each
        with the page of the unfiltered list that holds it.
    """
    needle = q.casefold()
    if not (needle or role):  # items are built for the page shown only
        index_pages = _paginate_groups(_index_groups(messages), page_size)
        number = min(max(page, 1), len(index_pages))
        before = sum(len(g) for p in index_pages[:number - 1] for g in p)
        shown = sum(len(g) for g in index_pages[number - 1])
        return MessagePage(total=len(messages), matched=len(messages), page=number, pages=len(index_pages),
                           first=before + 1 if shown else 0, last=before + shown, q=q, role=role,
                           messages=messages, groups=index_pages[number - 1])
    groups = _groups(messages)
    pages = _paginate(groups, page_size)
    context_pages: dict[int, int] = {}
    if needle or role:
        for number, items in enumerate(pages, start=1):
            for item in items:
                for member in (item, *item.results):
                    context_pages[member.index] = number
        hits = []
        for item in (m for g in groups for m in (g, *g.results)):
            if role and item.role != role:
                continue
            snippet = _matches(item, item.message, needle) if needle else None
            if needle and snippet is None:
                continue
            hits.append(MessageItem(**{**item.__dict__, "results": [], "snippet": snippet,
                                       "context_page": context_pages[item.index]}))
        pages = [hits[i:i + page_size] for i in range(0, len(hits), page_size)] or [[]]
        matched = len(hits)
    else:
        matched = len(messages)
    number = min(max(page, 1), len(pages))
    before = sum(_flatten_count(p) for p in pages[:number - 1])
    shown = _flatten_count(pages[number - 1])
    return MessagePage(total=len(messages), matched=matched, page=number, pages=len(pages),
                       first=before + 1 if shown else 0, last=before + shown, q=q, role=role, hits=pages[number - 1])
