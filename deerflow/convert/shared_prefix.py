"""Stored full ``messages`` lists that are prefixes of each other: held once (:class:`SharedPrefix`, the
compaction walk's memory saving) and decoded once (:class:`PrefixDecoder`, its decoding time)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["PrefixDecoder", "SharedPrefix"]


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


# msgpack ext item formats: first byte -> (bytes of the length field, fixed payload size or None)
_EXT_ITEM = {0xD4: (0, 1), 0xD5: (0, 2), 0xD6: (0, 4), 0xD7: (0, 8), 0xD8: (0, 16),
             0xC7: (1, None), 0xC8: (2, None), 0xC9: (4, None)}


def _array_header(raw: bytes) -> tuple[int, int] | None:
    """``(item count, header bytes)`` when ``raw`` starts with a msgpack array header, else ``None``."""
    if not raw:
        return None
    first = raw[0]
    if 0x90 <= first <= 0x9F:
        return first & 0x0F, 1
    if first == 0xDC and len(raw) >= 3:
        return int.from_bytes(raw[1:3], "big"), 3
    if first == 0xDD and len(raw) >= 5:
        return int.from_bytes(raw[1:5], "big"), 5
    return None


def _array_header_for(n: int) -> bytes:
    """The msgpack array header of ``n`` items."""
    if n <= 15:
        return bytes([0x90 | n])
    if n <= 0xFFFF:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def _ext_offsets(raw: bytes, start: int, count: int) -> list[int] | None:
    """Where each of ``count`` items starting at ``start`` ends, when every one is a single msgpack ext item.

    Returns ``[start, end of item 0, ..., end of item count-1]`` (byte offsets in ``raw``), or ``None`` when
    an item is not one ext item (a map, a string, ...) or the items do not end exactly at ``len(raw)``.
    """
    offsets, pos, size = [start], start, len(raw)
    for _ in range(count):
        if pos >= size or raw[pos] not in _EXT_ITEM:
            return None
        width, fixed = _EXT_ITEM[raw[pos]]
        length = fixed if fixed is not None else int.from_bytes(raw[pos + 1:pos + 1 + width], "big")
        pos += 2 + width + length  # format byte, length field, type byte, payload
        offsets.append(pos)
    return offsets if pos == size else None


# msgpack formats of a fixed size after the first byte, and of a length field of some width
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCC: 1, 0xD0: 1, 0xCD: 2, 0xD1: 2, 0xCA: 4, 0xCE: 4, 0xD2: 4,
          0xCB: 8, 0xCF: 8, 0xD3: 8}
_SIZED = {0xD9: 1, 0xC4: 1, 0xDA: 2, 0xC5: 2, 0xDB: 4, 0xC6: 4}
_KEY_CHANNEL_VALUES, _KEY_MESSAGES = b"\xaechannel_values", b"\xa8messages"


def _skip(raw: bytes, pos: int) -> int:
    """Where the msgpack value starting at ``pos`` ends (a byte offset).

    Raises:
        ValueError: not a msgpack value there (or it runs past the end).
    """
    if pos >= len(raw):
        raise ValueError("msgpack value runs past the end")
    first = raw[pos]
    if first <= 0x7F or first >= 0xE0:
        return pos + 1
    if 0xA0 <= first <= 0xBF:
        return pos + 1 + (first & 0x1F)
    if first in _FIXED:
        return pos + 1 + _FIXED[first]
    if first in _SIZED:
        width = _SIZED[first]
        return pos + 1 + width + int.from_bytes(raw[pos + 1:pos + 1 + width], "big")
    if first in _EXT_ITEM:
        width, fixed = _EXT_ITEM[first]
        return pos + 2 + width + (fixed if fixed is not None else int.from_bytes(raw[pos + 1:pos + 1 + width], "big"))
    if 0x80 <= first <= 0x9F or first in (0xDC, 0xDD, 0xDE, 0xDF):
        count, pos = _container(raw, pos)
        for _ in range(count):
            pos = _skip(raw, pos)
        return pos
    raise ValueError(f"not a msgpack value: 0x{first:02x}")


def _container(raw: bytes, pos: int) -> tuple[int, int]:
    """``(values to skip, offset of the first)`` of the array or map at ``pos`` (a map counts keys and values)."""
    first = raw[pos]
    if first <= 0x8F:
        return 2 * (first & 0x0F), pos + 1
    if first <= 0x9F:
        return first & 0x0F, pos + 1
    width = 2 if first in (0xDC, 0xDE) else 4
    count = int.from_bytes(raw[pos + 1:pos + 1 + width], "big")
    return (2 * count if first in (0xDE, 0xDF) else count), pos + 1 + width


def _value_of(raw: bytes, pos: int, key: bytes) -> int | None:
    """Where the value of ``key`` (its msgpack bytes) starts in the map at ``pos``, or ``None``."""
    first = raw[pos] if pos < len(raw) else 0
    if not (0x80 <= first <= 0x8F or first in (0xDE, 0xDF)):
        return None
    count, pos = _container(raw, pos)
    for _ in range(count // 2):
        end = _skip(raw, pos)
        if raw[pos:end] == key:
            return end
        pos = _skip(raw, end)
    return None


def _messages_at(raw: bytes) -> int | None:
    """Where ``channel_values["messages"]`` starts in a serialized checkpoint (SQLite's row), when it is an array."""
    try:
        values = _value_of(raw, 0, _KEY_CHANNEL_VALUES)
        at = None if values is None else _value_of(raw, values, _KEY_MESSAGES)
    except (ValueError, IndexError):
        return None
    return at if at is not None and _array_header(raw[at:at + 5]) is not None else None


class PrefixDecoder:
    """Decodes a run of stored message lists where each is, byte for byte, a prefix of the one before (or after).

    A full-mode thread stores the whole ``messages`` list at every checkpoint
    (on Postgres one ``checkpoint_blobs`` row per version: a msgpack array of
    one ext item per message). A msgpack array is its header followed by its
    items' encodings, each self-delimiting, so when the stored bytes of a list
    of ``n`` items are exactly the first ``n`` item encodings of a list decoded
    before, decoding them gives the first ``n`` items of that list: the same
    bytes, the same (deterministic) decoding. :meth:`loads` then slices instead
    of decoding, and for a longer list whose bytes start with the last full
    one's decodes only the new tail (a header for the tail's items, then its
    bytes). Item boundaries come from the ext items' own length fields and are
    checked to end exactly at the end of the stored bytes; anything else (a
    top-level value that is no array, an item that is no single ext item, bytes
    that differ) is decoded in full.

    Args:
        decode: the full decoding of one msgpack value (``bytes -> object``), e.g. the saver's with a
            sharing ext hook.

    Attributes:
        counts: ``{"full": n, "prefix": n, "tail": n}``: how each array value was decoded (counts).
    """

    #: Recently decoded lists kept to compare with (count): a checkpoint's pending writes are message
    #: lists too, read between two checkpoints' stored lists.
    KEEP = 4

    def __init__(self, decode: Callable[[bytes], Any]):
        self._decode = decode
        self._bases: list[tuple[bytes, list[int], list[Any]]] = []  # raw bytes, item offsets, decoded list
        self.counts = {"full": 0, "prefix": 0, "tail": 0}

    def _keep(self, i: int | None, base: tuple[bytes, list[int], list[Any]]) -> None:
        if i is not None:
            del self._bases[i]
        self._bases.insert(0, base)
        del self._bases[self.KEEP:]

    def loads(self, raw: bytes) -> Any:
        """``decode(raw)``, sharing the work (and the item objects) with a list decoded before.

        ``raw`` is a stored value: a list on its own (a Postgres blob, a write), or a whole serialized
        checkpoint (SQLite's row), whose ``channel_values["messages"]`` list is then handled the same way
        and the rest of the checkpoint decoded around it.
        """
        head = _array_header(raw)
        if head is None:
            return self._checkpoint(raw)
        n, h = head
        hit = self._prefix(raw, 0, n, h)
        if hit is not None and hit[1] == len(raw):
            return hit[0]
        for i, base in enumerate(self._bases):
            braw, offsets, value = base
            bn, start = len(offsets) - 1, offsets[0]
            body = len(braw) - start
            if n > bn and len(raw) - h > body and raw.startswith(memoryview(braw)[start:], h):
                tail = self._tail(raw, h + body, n - bn)
                if tail is None:
                    break
                self.counts["tail"] += 1
                full = value + tail
                rest = _ext_offsets(raw, h + body, n - bn)
                if rest is not None:
                    self._keep(i, (raw, [o - start + h for o in offsets] + rest[1:], full))
                return full
        decoded = self._decode(raw)
        self.counts["full"] += 1
        if type(decoded) is list and len(decoded) == n:
            offsets_new = _ext_offsets(raw, h, n)
            if offsets_new is not None:
                self._keep(None, (raw, offsets_new, decoded))
        return decoded

    def _prefix(self, raw: bytes, at: int, n: int, h: int) -> tuple[list[Any], int] | None:
        """``(list, end offset)`` when the ``n`` items of the array at ``at`` (header ``h`` bytes) are, byte for
        byte, the first ``n`` item encodings of a kept list (so they end where those end)."""
        for i, base in enumerate(self._bases):
            braw, offsets, value = base
            if n < len(offsets) and raw.startswith(memoryview(braw)[offsets[0]:offsets[n]], at + h):
                self.counts["prefix"] += 1
                self._keep(i, base)
                return value[:n], at + h + offsets[n] - offsets[0]
        return None

    def _checkpoint(self, raw: bytes) -> Any:
        """A serialized checkpoint: its ``messages`` array through :meth:`loads`, the rest decoded around a nil.

        msgpack is context-free, so decoding the checkpoint with that array's bytes replaced by a nil gives
        every other value exactly, and the key keeps its place. Anything unexpected decodes in full.
        """
        at = _messages_at(raw)
        if at is None:
            return self._decode(raw)
        n, h = _array_header(raw[at:at + 5]) or (0, 0)
        hit = self._prefix(raw, at, n, h)
        if hit is not None:
            messages, end = hit
        else:
            try:
                end = _skip(raw, at)
            except (ValueError, IndexError):
                end = len(raw) + 1
            if end > len(raw):  # malformed: the full decoding answers (or raises) as it would anyway
                return self._decode(raw)
            messages = self.loads(raw[at:end])
        rest = self._decode(raw[:at] + b"\xc0" + raw[end:])
        values = rest.get("channel_values") if type(rest) is dict else None
        if type(values) is not dict or "messages" not in values or values["messages"] is not None:
            return self._decode(raw)
        values["messages"] = messages
        return rest

    def _tail(self, raw: bytes, at: int, k: int) -> list[Any] | None:
        try:
            tail = self._decode(_array_header_for(k) + raw[at:])
        except Exception:  # noqa: BLE001 - malformed: the full decode raises (or answers) as it would anyway
            return None
        return tail if type(tail) is list and len(tail) == k else None
