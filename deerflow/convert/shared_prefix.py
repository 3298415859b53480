"""A stored full ``messages`` list held as a prefix of its child's (the compaction walk's memory saving)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["SharedPrefix"]


class SharedPrefix:
    """A stored full ``messages`` list held as the first ``n`` items of a longer list read next to it.

    A full-mode thread stores the whole list at every checkpoint, and a
    parent's list is (the same decoded objects as) a prefix of its child's;
    holding each as ``(base, n)`` keeps one list of references per chain
    instead of one per checkpoint while a namespace waits to be walked
    (:class:`deerflow.convert.walk.Walk` with ``full_storage=True``).
    :func:`stored_seed` treats it as the stored list; :meth:`resolve` gives
    that list (a new one, equal item by item).

    Args:
        base: the longer list (never mutated).
        n: how many of its first items this value is (count, ``0 <= n <= len(base)``).
    """

    __slots__ = ("base", "n")

    def __init__(self, base: list[Any], n: int):
        self.base, self.n = base, n

    def __len__(self) -> int:
        return self.n

    def resolve(self) -> list[Any]:
        """The stored list (a new list of the first ``n`` items of ``base``)."""
        return self.base[:self.n]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.resolve())
