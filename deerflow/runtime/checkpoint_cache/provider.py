"""DeerFlow's Redis key prefix and server for the history cache (``runtime/checkpoint_cache/provider.py``).

The prefix is ``database.checkpoint_cache.key_prefix`` when set, else ``ckpt-hist:v1:<db hash>``, where the
hash is the first 12 hex digits of SHA-256 over the database identity, so two deployments sharing one Redis
never collide:

* Postgres: ``postgres:<host or localhost>:<port or 5432>/<database>:<postgres_schema or "">`` (no
  credentials: a password rotation keeps the namespace);
* SQLite: ``sqlite:<absolute path of {sqlite_dir}/deerflow.db>``; a relative ``sqlite_dir`` is resolved
  against the process's working directory, as DeerFlow resolves it. A dashboard started elsewhere derives
  another prefix: set ``key_prefix`` in both processes' config (or start both from one directory).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any
from urllib.parse import unquote, urlsplit

from deerflow.config.database_config import CheckpointCacheConfig, DatabaseConfig
from deerflow.runtime.checkpoint_cache.base import CACHE_FORMAT_VERSION

__all__ = ["checkpoint_cache_db_hash", "checkpoint_cache_key_prefix", "resolve_redis_url"]

_ENV_REDIS_URL = "DEER_FLOW_CHECKPOINT_CACHE_REDIS_URL"


def resolve_redis_url(config: CheckpointCacheConfig, environ: dict[str, str] | None = None) -> str:
    """The Redis URL of ``type: redis``: ``redis_url``, else ``$DEER_FLOW_CHECKPOINT_CACHE_REDIS_URL``, else
    ``$REDIS_URL``, else ``redis://localhost:6379/0`` (DeerFlow's order)."""
    env = os.environ if environ is None else environ
    return config.redis_url or env.get(_ENV_REDIS_URL) or env.get("REDIS_URL") or "redis://localhost:6379/0"


def _stable_postgres_identity(postgres_url: str) -> str:
    """``host:port/database`` of a libpq URL, credentials left out; an unparsable URL is its own identity."""
    if not postgres_url:
        return ""
    try:
        parts = urlsplit(postgres_url)
        netloc = parts.netloc.rpartition("@")[2]
        if netloc.startswith("["):  # IPv6 literal
            host, _, rest = netloc[1:].partition("]")
            port_text = rest.removeprefix(":")
        else:
            host, _, port_text = netloc.partition(":")
        port = int(port_text) if port_text else None
        database = unquote(parts.path.lstrip("/"))
    except ValueError:
        return postgres_url
    return f"{host or 'localhost'}:{port or 5432}/{database}"


def checkpoint_cache_db_hash(database: Any) -> str:
    """12 hex digits naming the deployment's database (see the module docstring).

    Args:
        database: a :class:`DatabaseConfig`, or anything with DeerFlow's ``backend``, ``postgres_url``,
            ``postgres_schema`` and ``sqlite_dir`` attributes.
    """
    backend = getattr(database, "backend", "memory")
    if backend == "postgres":
        url = getattr(database, "postgres_url", "") or ""
        schema = getattr(database, "postgres_schema", "") or ""
        identity = f"postgres:{_stable_postgres_identity(url)}:{schema}"
    elif backend == "sqlite":
        sqlite_dir = getattr(database, "sqlite_dir", ".deer-flow/data")
        identity = f"sqlite:{os.path.join(os.path.realpath(sqlite_dir), 'deerflow.db')}"
    else:
        identity = "memory"
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def checkpoint_cache_key_prefix(config: Any) -> str:
    """The Redis key prefix of the history cache.

    Args:
        config: a :class:`DatabaseConfig`, or DeerFlow's ``AppConfig`` (its ``database``).

    Returns:
        ``checkpoint_cache.key_prefix`` when set, else ``ckpt-hist:v1:<checkpoint_cache_db_hash>``.
    """
    database: DatabaseConfig = getattr(config, "database", config)
    cache = database.checkpoint_cache
    if cache.key_prefix:
        return cache.key_prefix
    return f"ckpt-hist:v{CACHE_FORMAT_VERSION}:{checkpoint_cache_db_hash(database)}"
