"""Purge one thread's entries from DeerFlow's Redis history cache, as DeerFlow's own ``adelete_thread`` does.

DeerFlow treats cache entries as immutable and removes a thread's entries only when its own
``delete_thread``/``prune`` removes the thread's checkpoints: ``SCAN MATCH <stem>*`` then ``UNLINK``, where
the stem is :func:`~deerflow.runtime.checkpoint_cache.base.thread_key_stem` of the prefix
(:func:`~deerflow.runtime.checkpoint_cache.provider.checkpoint_cache_key_prefix`). A rewrite by this dashboard
(convert, compact, prune, revert, delete) changes stored checkpoints outside DeerFlow, so the job calls
:func:`purge_thread` after each committed rewrite.

One difference on purpose: the thread id is escaped in the ``MATCH`` pattern (``*``, ``?``, ``[``, ``]``,
``\\``) and every key returned is checked to begin with the stem, so a thread id holding glob characters
never matches another thread's keys (DeerFlow's pattern would).

``type: memory`` caches live inside each DeerFlow process: nothing here can reach them; they hold their
entries until that process restarts (or evicts them). ``max_entries: 0`` disables the cache of either type.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from typing import Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.runtime.checkpoint_cache.base import thread_key_stem
from deerflow.runtime.checkpoint_cache.provider import checkpoint_cache_key_prefix, resolve_redis_url

__all__ = ["CachePurge", "count_keys", "purge_thread"]

log = logging.getLogger("deerflow.checkpoint_cache")

#: Keys asked per ``SCAN`` step (DeerFlow's ``count``).
_SCAN_COUNT = 500
#: Seconds to wait for Redis to connect or answer before the purge is recorded as failed.
_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class CachePurge:
    """What a purge did, recorded on the job's result row.

    Attributes:
        type: ``redis``, ``memory`` (per process: nothing to purge from here) or ``disabled``
            (``max_entries: 0``).
        key_prefix: the Redis key prefix (``""`` unless ``redis``).
        keys_deleted: keys unlinked (count); ``None`` when nothing was tried or the purge failed.
        error: why a Redis purge failed (``""`` when it did not); its entries then expire after
            ``ttl_seconds``.
    """

    type: str
    key_prefix: str = ""
    keys_deleted: int | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"type", "key_prefix", "keys_deleted", "error"}``."""
        return asdict(self)


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _client(database: DatabaseConfig) -> Any:
    import redis

    return redis.Redis.from_url(resolve_redis_url(database.checkpoint_cache), socket_timeout=_TIMEOUT_S,
                                socket_connect_timeout=_TIMEOUT_S, decode_responses=False)


def _kind(database: DatabaseConfig) -> str:
    cache = database.checkpoint_cache
    return "disabled" if cache.max_entries == 0 else cache.type


def purge_thread(database: DatabaseConfig, thread_id: str) -> CachePurge:
    """Unlink every Redis history-cache key of ``thread_id`` (``SCAN`` + ``UNLINK``); never raises.

    Args:
        database: the ``database:`` block (its ``checkpoint_cache``, and the identity of the prefix).
        thread_id: the rewritten thread.

    Returns:
        A :class:`CachePurge`: for ``type: redis`` the keys deleted, or the error that stopped it (a Redis
        outage leaves the entries to their TTL, as DeerFlow's own purge does); for ``memory`` and a disabled
        cache nothing is tried.
    """
    kind = _kind(database)
    if kind != "redis":
        return CachePurge(type=kind)
    prefix = checkpoint_cache_key_prefix(database)
    stem = thread_key_stem(prefix, thread_id).encode()
    deleted = 0
    try:
        with _client(database) as client:
            pattern = _glob_escape(thread_key_stem(prefix, thread_id)) + "*"
            cursor = 0
            while True:
                cursor, keys = client.scan(cursor=cursor, match=pattern, count=_SCAN_COUNT)
                mine = [k for k in keys if k.startswith(stem)]
                if mine:
                    deleted += int(client.unlink(*mine))
                if cursor == 0:
                    break
    except Exception as exc:  # noqa: BLE001 - the rewrite committed; a cache outage is recorded, not raised
        log.warning("history cache purge of thread %r failed; its entries expire after ttl_seconds: %s",
                    thread_id, exc)
        return CachePurge(type="redis", key_prefix=prefix, keys_deleted=None,
                          error=f"{type(exc).__name__}: {exc}")
    return CachePurge(type="redis", key_prefix=prefix, keys_deleted=deleted)


def count_keys(database: DatabaseConfig) -> int | None:
    """Redis history-cache keys under this database's prefix (count; ``SCAN``, never ``KEYS``).

    Returns:
        The count, or ``None`` unless the cache is ``type: redis``.

    Raises:
        redis.RedisError: Redis cannot be reached or answered with an error.
    """
    if _kind(database) != "redis":
        return None
    pattern = _glob_escape(checkpoint_cache_key_prefix(database) + ":") + "*"
    with _client(database) as client:
        return sum(1 for _ in client.scan_iter(match=pattern, count=_SCAN_COUNT))
