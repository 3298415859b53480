"""DeerFlow's delta-history cache, as far as the dashboard touches it: DeerFlow's key derivation at DeerFlow's
module paths (:mod:`.base`, :mod:`.provider`) and the purge of one thread's Redis entries after a rewrite
(:mod:`.purge`)."""

from deerflow.runtime.checkpoint_cache.base import CACHE_FORMAT_VERSION, make_history_key, thread_key_stem
from deerflow.runtime.checkpoint_cache.provider import (
    checkpoint_cache_db_hash,
    checkpoint_cache_key_prefix,
    resolve_redis_url,
)
from deerflow.runtime.checkpoint_cache.purge import CachePurge, count_keys, purge_thread

__all__ = [
    "CACHE_FORMAT_VERSION",
    "CachePurge",
    "checkpoint_cache_db_hash",
    "checkpoint_cache_key_prefix",
    "count_keys",
    "make_history_key",
    "purge_thread",
    "resolve_redis_url",
    "thread_key_stem",
]
