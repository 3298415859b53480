"""DeerFlow's delta-history cache on the audit: each process's setting (its heartbeat carries it) and, for
Redis, how many keys this database has there.

DeerFlow's ``database.checkpoint_cache`` (``memory`` or ``redis``) is performance only and may differ per
process. A ``memory`` cache lives inside each DeerFlow process: entries of a thread the dashboard rewrote stay
there until that process restarts (or evicts them), and nothing outside can purge them. A ``redis`` cache is
shared and the dashboard purges a rewritten thread's keys (:mod:`deerflow.runtime.checkpoint_cache.purge`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.core.cache import cache

from deerflow.config import DatabaseConfig
from deerflow.runtime.checkpoint_cache import checkpoint_cache_key_prefix, count_keys, resolve_redis_url

__all__ = ["KEY_COUNT_TTL_S", "MEMORY_WARNING", "cache_setting", "history_cache"]

#: Seconds the audit reuses a Redis key count (counting SCANs the whole keyspace).
KEY_COUNT_TTL_S = 60

#: Said wherever a process runs the in-process cache.
MEMORY_WARNING = ("In-process 'memory' history caches keep a rewritten thread's old entries until that DeerFlow "
                  "process restarts (or evicts them); the dashboard cannot reach them. Restart those processes "
                  "after maintenance, or use type: redis, whose entries the dashboard purges.")


def _redis_server(url: str) -> str:
    """``host:port/db`` of a Redis URL, credentials left out."""
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}/{parts.path.lstrip('/') or '0'}"


def cache_setting(database: DatabaseConfig) -> dict[str, Any]:
    """This process's ``checkpoint_cache`` as its heartbeat reports it.

    Returns:
        ``{"type": "memory" | "redis" | "disabled", "max_entries", "ttl_seconds", "key_prefix",
        "redis": "host:port/db" | ""}`` (never the Redis password).
    """
    cache = database.checkpoint_cache
    kind = "disabled" if cache.max_entries == 0 else cache.type
    return {"type": kind, "max_entries": cache.max_entries, "ttl_seconds": cache.ttl_seconds,
            "key_prefix": checkpoint_cache_key_prefix(database) if database.backend != "memory" else "",
            "redis": _redis_server(resolve_redis_url(cache)) if kind == "redis" else ""}


def history_cache(database: DatabaseConfig, processes: list[dict[str, Any]]) -> dict[str, Any]:
    """The audit's history-cache section.

    Args:
        database: this process's ``database:`` block.
        processes: the audit's process rows (each with the ``checkpoint_cache`` its heartbeat carried).

    Returns:
        ``{"setting": cache_setting(database), "redis_keys": count (at most :data:`KEY_COUNT_TTL_S` old) | None,
        "error": str,
        "memory_processes": [names of live processes on a memory cache], "warning": str}`` (``warning`` is
        :data:`MEMORY_WARNING` when this process or a live one runs a memory cache, else ``""``).
    """
    setting = cache_setting(database)
    keys, error = None, ""
    if setting["type"] == "redis":
        cache_key = f"history-cache-keys:{setting['redis']}:{setting['key_prefix']}"
        keys = cache.get(cache_key)
        if keys is None:
            try:
                keys = count_keys(database)  # a SCAN of the whole keyspace: counted once a minute at most
                cache.set(cache_key, keys, KEY_COUNT_TTL_S)
            except Exception as exc:  # noqa: BLE001 - an unreachable Redis is shown, not a 500
                error = f"{type(exc).__name__}: {exc}"
    memory = [p["name"] for p in processes
              if p.get("state") == "live" and (p.get("checkpoint_cache") or {}).get("type") == "memory"]
    warn = setting["type"] == "memory" or bool(memory)
    return {"setting": setting, "redis_keys": keys, "error": error, "memory_processes": memory,
            "warning": MEMORY_WARNING if warn else ""}
