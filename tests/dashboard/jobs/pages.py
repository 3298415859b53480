"""Tiny HTML helpers for the jobs page tests (stdlib ``html.parser``): tags with their attributes."""

from __future__ import annotations

from html.parser import HTMLParser


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags(html: bytes | str, tag: str, /, **match: str) -> list[dict[str, str | None]]:
    """Attributes of every ``<tag>`` element whose attributes include ``match`` (``_`` in keys means ``-``)."""
    parser = _Tags()
    parser.feed(html.decode() if isinstance(html, bytes) else html)
    wanted = {k.replace("_", "-"): v for k, v in match.items()}
    return [a for t, a in parser.tags if t == tag and all(a.get(k) == v for k, v in wanted.items())]


def form_inputs(html: bytes | str, form_id: str) -> dict[str, str | None]:
    """``name -> value`` of the inputs inside the form with id ``form_id`` (first form only)."""
    parser = _Tags()
    parser.feed(html.decode() if isinstance(html, bytes) else html)
    inside, out = False, {}
    for tag, attrs in parser.tags:
        if tag == "form":
            if inside:
                break
            inside = attrs.get("id") == form_id
        elif inside and tag in ("input", "button") and attrs.get("name"):
            out.setdefault(attrs["name"], attrs.get("value"))
    return out
