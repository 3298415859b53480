"""DeerFlow's cache keys (``runtime/checkpoint_cache/base.py`` in DeerFlow): one entry per
(thread, namespace, checkpoint id, channel), every key of a thread under one stem.

Laws: ``make_history_key(p, t, ns, c, ch).startswith(thread_key_stem(p, t))`` for every ``ns, c, ch``; the
thread id stays readable, the rest is the first 24 hex digits of SHA-256 over ``ns NUL c NUL ch``.
"""

from __future__ import annotations

import hashlib

__all__ = ["CACHE_FORMAT_VERSION", "make_history_key", "thread_key_stem"]

#: The version in DeerFlow's default key prefix (``ckpt-hist:v1:...``).
CACHE_FORMAT_VERSION = 1


def make_history_key(key_prefix: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str,
                     channel: str) -> str:
    """The key DeerFlow caches one checkpoint's delta history of ``channel`` under:
    ``{key_prefix}:{thread_id}:{digest}``."""
    digest = hashlib.sha256(f"{checkpoint_ns}\x00{checkpoint_id}\x00{channel}".encode()).hexdigest()[:24]
    return f"{key_prefix}:{thread_id}:{digest}"


def thread_key_stem(key_prefix: str, thread_id: str) -> str:
    """The prefix of every key of one thread: ``{key_prefix}:{thread_id}:``."""
    return f"{key_prefix}:{thread_id}:"
