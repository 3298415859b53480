"""Each distinct message decoded, hashed and serialized once per conversion.

A delta thread's snapshots repeat the same messages over and over, and a
full-mode rewrite stores the whole list at every checkpoint: a 1,000-checkpoint
thread holds a few hundred distinct messages but writes ~200,000 copies of
them. Three helpers keep the per-copy cost to pointer copies and ``memcpy``:

* :class:`SharingDecoder` decodes each distinct serialized message once, so
  every snapshot and write of a thread shares one object per distinct
  message: memory holds one copy of each message plus lists of references.
* :class:`MessageEncoder` asks the saver's own serializer to encode each
  distinct message once and keeps the result as an ``ormsgpack.Ext``. A list
  of those ``Ext`` objects serializes to exactly the bytes the serializer
  writes for the list of messages (a msgpack array is its header followed by
  its items' encodings, and LangGraph's serializer encodes a message as one
  ext item whatever surrounds it); every encoded message is checked to
  re-encode byte for byte before it is used, and anything that is not one ext
  item is left for the serializer to encode as usual.
* :class:`RecordingSerializer` wraps the saver's serializer and keeps the
  SHA-256 of the last bytes it produced, so a conversion can compare what the
  database holds with what the saver sent.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import EXT_DELTA_SNAPSHOT, EXT_PYDANTIC_V2

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert.digest import canonical_messages
from deerflow.convert.shared_prefix import PrefixDecoder

__all__ = ["MessageDigester", "MessageEncoder", "RecordingSerializer", "SharingDecoder"]

# msgpack ext formats: first byte -> (header length, payload length or None when it is in the header)
_FIXEXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
_EXT = {0xC7: (1, ">B"), 0xC8: (2, ">H"), 0xC9: (4, ">I")}


def _as_ext(item: bytes) -> ormsgpack.Ext | None:
    """The ``Ext`` whose msgpack encoding is exactly ``item``, or ``None`` if ``item`` is no single ext item."""
    if not item:
        return None
    first = item[0]
    if first in _FIXEXT:
        size, start = _FIXEXT[first], 2
    elif first in _EXT:
        width, fmt = _EXT[first]
        if len(item) < 2 + width:
            return None
        size = struct.unpack(fmt, item[1:1 + width])[0]
        start = 2 + width
    else:
        return None
    if len(item) != start + size:
        return None
    code = struct.unpack(">b", item[start - 1:start])[0]
    return ormsgpack.Ext(code, item[start:])


def _extends(messages: list[Any], last: list[Any]) -> bool:
    """True when ``messages`` starts with every item of the non-empty ``last`` (the same objects)."""
    k = len(last)
    return bool(k) and len(messages) >= k and messages[k - 1] is last[-1] and messages[:k] == last


class SharingDecoder:
    """The saver's serializer, decoding each distinct serialized message once.

    LangGraph's serializer stores a message as one msgpack ext item
    (``EXT_PYDANTIC_V2``); decoding is a pure function of the item's bytes,
    so :meth:`loads_typed` decodes msgpack values with an ext hook that
    returns the object made the first time those exact bytes were seen. Every
    snapshot and write of a thread then shares one object per distinct message
    (memory: one copy of each message plus lists of references), and the
    per-copy cost is a dictionary lookup. ``_DeltaSnapshot`` items are decoded
    around that hook (their inner list is unique, so they are not cached).
    A stored list whose bytes are a prefix of (or extend) a list decoded just
    before is not decoded again: :class:`~deerflow.convert.shared_prefix.PrefixDecoder`
    slices it (or decodes only the new tail), with the same item objects.
    Serializers without JsonPlus's ext hook are used as they are.

    Args:
        inner: the saver's serializer (``saver.serde``).
    """

    def __init__(self, inner: Any):
        self.inner = inner
        self._hook: Callable[[int, bytes], Any] | None = getattr(inner, "_unpack_ext_hook", None)
        self._cache: dict[bytes, Any] = {}
        self.prefixes = PrefixDecoder(self._unpack)
        # a thread's snapshots, read newest first, are each a prefix of the one before: compared among themselves
        self.snapshots = PrefixDecoder(self._unpack)

    def _unpack(self, raw: bytes) -> Any:
        return ormsgpack.unpackb(raw, ext_hook=self._ext, option=ormsgpack.OPT_NON_STR_KEYS)

    def _ext(self, code: int, data: bytes) -> Any:
        if code == EXT_DELTA_SNAPSHOT:
            return _DeltaSnapshot(self.snapshots.loads(data))
        assert self._hook is not None, "loads_typed uses this ext hook only when the serializer has one"
        if code != EXT_PYDANTIC_V2:
            return self._hook(code, data)
        hit = self._cache.get(data)
        if hit is None:
            hit = self._hook(code, data)
            if hit is not None:
                self._cache[data] = hit
        return hit

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The wrapped serializer's decoding, sharing decoded messages (and, through
        :attr:`prefixes`, the decoding of a list whose bytes are a prefix of one decoded before)."""
        type_, raw = data
        if type_ == "msgpack" and self._hook is not None:
            return self.prefixes.loads(raw)
        return self.inner.loads_typed(data)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """The wrapped serializer's encoding."""
        encoded: tuple[str, bytes] = self.inner.dumps_typed(obj)
        return encoded

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class MessageEncoder:
    """Messages as the saver's serializer encodes them, each distinct object encoded once.

    Args:
        serde: the saver's serializer (``saver.serde``).

    :meth:`encode` returns a list to store in place of a message list: each
    item an ``ormsgpack.Ext`` holding the serializer's own bytes for that
    message, or the message itself when its encoding is not one ext item.
    Serializing that list (alone, or inside a checkpoint) gives the same bytes
    as serializing the messages.
    """

    def __init__(self, serde: Any):
        self._serde = serde
        self._cache: dict[int, tuple[Any, Any]] = {}
        self._last: tuple[list[Any], list[Any]] = ([], [])

    def _one(self, m: Any) -> Any:
        hit = self._cache.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        encoded: Any = m
        type_, data = self._serde.dumps_typed([m])
        if type_ == "msgpack" and data[:1] == b"\x91":
            ext = _as_ext(data[1:])
            if ext is not None and ormsgpack.packb([ext]) == data:
                encoded = ext
        self._cache[id(m)] = (m, encoded)
        return encoded

    def encode(self, messages: list[Any]) -> list[Any]:
        """``messages`` with every item replaced by its cached encoding (a new list).

        When ``messages`` extends the previous call's list (the same objects
        first), only the new items are looked up: a checkpoint usually holds
        its parent's list plus a few messages.
        """
        last, last_encoded = self._last
        if _extends(messages, last):
            encoded = last_encoded + [self._one(m) for m in messages[len(last):]]
        else:
            encoded = [self._one(m) for m in messages]
        self._last = (list(messages), encoded)
        return encoded


class MessageDigester:
    """:func:`deerflow.convert.digest.messages_sha256` with each message's canonical JSON made once.

    ``json.dumps`` of a list with ``separators=(',', ':')`` is
    ``'[' + ','.join(items) + ']'``, so the digest is the same bytes, hashed
    incrementally: when a list extends the previous call's list (the same
    objects first), the hash state of that prefix is reused. The cache keeps
    a reference to every message it saw, so ids stay unique.
    """

    def __init__(self) -> None:
        self._json: dict[int, tuple[Any, bytes]] = {}
        self._last: tuple[list[Any], Any] = ([], None)

    def _part(self, m: Any) -> bytes:
        hit = self._json.get(id(m))
        if hit is None or hit[0] is not m:
            text = json.dumps(canonical_messages([m])[0], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            hit = (m, text.encode("utf-8"))
            self._json[id(m)] = hit
        return hit[1]

    def __call__(self, messages: list[Any]) -> str:
        """Hex SHA-256 of the canonical JSON of ``messages``."""
        last, state = self._last
        k = len(last)
        if _extends(messages, last):
            h = state.copy()
        else:
            h, k = hashlib.sha256(b"["), 0
        for i in range(k, len(messages)):
            if i:
                h.update(b",")
            h.update(self._part(messages[i]))
        self._last = (list(messages), h.copy())
        h.update(b"]")
        return str(h.hexdigest())


class RecordingSerializer:
    """The saver's serializer, remembering the SHA-256 and size of the last bytes it produced.

    Args:
        inner: the serializer to wrap (``saver.serde``).

    Attributes:
        last: ``(sha256 hex, size in bytes)`` of the latest :meth:`dumps_typed` output, or ``None``.
    """

    def __init__(self, inner: Any):
        self.inner = inner
        self.last: tuple[str, int] | None = None

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """The wrapped serializer's output, recorded."""
        type_, data = self.inner.dumps_typed(obj)
        self.last = (hashlib.sha256(data or b"").hexdigest(), len(data or b""))
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The wrapped serializer's decoding."""
        return self.inner.loads_typed(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
