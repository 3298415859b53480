"""DeerFlow's ``database:`` block of ``config.yaml`` as a pydantic model.

Keys and defaults follow DeerFlow's ``DatabaseConfig`` (spec, "Facts from
DeerFlow's configuration"): ``backend`` (memory | sqlite | postgres),
``sqlite_dir`` (the checkpoint file is ``{sqlite_dir}/deerflow.db``),
``postgres_url`` (``$VAR`` resolved from the environment),
``postgres_schema`` (optional), ``checkpoint_channel_mode`` (full | delta,
default full) and ``checkpoint_delta.snapshot_frequency`` (integer >= 1,
default 10; the legacy flat key ``checkpoint_delta_snapshot_frequency`` is
carried onto it, the nested key winning), and ``checkpoint_cache`` (DeerFlow's
delta-history cache, ``CheckpointCacheConfig``: ``type`` memory | redis,
``max_entries``, ``redis_url``, ``ttl_seconds``, ``key_prefix``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

__all__ = ["CheckpointCacheConfig", "CheckpointDeltaConfig", "DatabaseConfig"]


class CheckpointDeltaConfig(BaseModel):
    """``database.checkpoint_delta``: delta-mode tuning."""

    model_config = ConfigDict(extra="ignore")

    snapshot_frequency: StrictInt = Field(default=10, ge=1)
    """Messages-channel updates between two ``_DeltaSnapshot`` blobs (count, >= 1)."""


class CheckpointCacheConfig(BaseModel):
    """``database.checkpoint_cache``: DeerFlow's delta-history cache (performance only; may differ per process).

    DeerFlow wraps its saver in this cache in delta mode. Entries are keyed
    ``{key_prefix}:{thread_id}:{digest}``; DeerFlow purges a thread's entries only on its own thread
    deletion and prune, so the dashboard purges them after each committed rewrite
    (:mod:`deerflow.runtime.checkpoint_cache.purge`).
    """

    model_config = ConfigDict(extra="ignore")

    type: Literal["memory", "redis"] = "memory"
    """``memory``: a process-local LRU in every DeerFlow process (nothing the dashboard can reach);
    ``redis``: one cache shared by every process."""
    max_entries: StrictInt = Field(default=128, ge=0)
    """LRU capacity of the memory cache (count); ``0`` disables the cache of either type."""
    redis_url: str | None = None
    """The Redis server of ``type: redis``; unset: ``DEER_FLOW_CHECKPOINT_CACHE_REDIS_URL``, ``REDIS_URL``, or
    ``redis://localhost:6379/0``."""
    ttl_seconds: StrictInt = Field(default=86400, ge=0)
    """Seconds a Redis entry lives (``0``: no expiry)."""
    key_prefix: str = ""
    """Overrides the Redis key prefix (default ``ckpt-hist:v1:<hash of the database identity>``)."""


class DatabaseConfig(BaseModel):
    """``database:`` — where the LangGraph checkpoints live and in which channel mode."""

    model_config = ConfigDict(extra="ignore")

    backend: Literal["memory", "sqlite", "postgres"] = "sqlite"
    sqlite_dir: str = ".deer-flow/data"
    postgres_url: str | None = None
    postgres_schema: str | None = None
    checkpoint_channel_mode: Literal["full", "delta"] = "full"
    checkpoint_delta: CheckpointDeltaConfig = Field(default_factory=CheckpointDeltaConfig)
    checkpoint_cache: CheckpointCacheConfig = Field(default_factory=CheckpointCacheConfig)

    @model_validator(mode="before")
    @classmethod
    def _carry_legacy_frequency(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "checkpoint_delta_snapshot_frequency" not in data:
            return data
        data = dict(data)
        legacy = data.pop("checkpoint_delta_snapshot_frequency")
        nested = data.get("checkpoint_delta")
        if nested is None:
            nested = {}
        if not isinstance(nested, dict):
            # Leave a malformed nested block for the field validator to report.
            return data
        nested = dict(nested)
        nested.setdefault("snapshot_frequency", legacy)
        data["checkpoint_delta"] = nested
        return data

    @model_validator(mode="after")
    def _postgres_needs_url(self) -> DatabaseConfig:
        if self.backend == "postgres" and not self.postgres_url:
            raise ValueError("postgres_url is required when backend is 'postgres'")
        return self

    @property
    def snapshot_frequency(self) -> int:
        """Shortcut for ``checkpoint_delta.snapshot_frequency``."""
        return self.checkpoint_delta.snapshot_frequency

    def sqlite_path(self, base_dir: Path | None = None) -> Path:
        """``{sqlite_dir}/deerflow.db``; a relative ``sqlite_dir`` is resolved against ``base_dir``."""
        directory = Path(self.sqlite_dir)
        if not directory.is_absolute() and base_dir is not None:
            directory = base_dir / directory
        return directory / "deerflow.db"
