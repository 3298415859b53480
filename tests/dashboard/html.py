"""A small HTML reader for page tests (stdlib ``html.parser``): elements with attributes and text."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """Decoded text of the element and its descendants, whitespace collapsed."""
        return " ".join("".join(self._texts()).split())

    def _texts(self):
        yield from self.parts

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, *, cls: str | None = None, **attrs: str) -> list[Element]:
        out = []
        for el in self.iter():
            if tag and el.tag != tag:
                continue
            if cls and cls not in el.classes:
                continue
            if any(el.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(el)
        return out

    def find(self, tag: str | None = None, **kwargs) -> Element:
        found = self.find_all(tag, **kwargs)
        assert found, f"no <{tag}> {kwargs}"
        return found[0]


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        el = Element(tag, dict(attrs))
        self.stack[-1].children.append(el)
        if tag not in VOID:
            self.stack.append(el)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        for el in self.stack:
            el.parts.append(data)


def parse(html: str | bytes) -> Element:
    """The document tree of ``html``."""
    builder = _Builder()
    builder.feed(html.decode("utf-8") if isinstance(html, bytes) else html)
    builder.close()
    return builder.root
