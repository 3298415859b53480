"""DeerFlow-style ``config.yaml`` files for tests: one writer for every suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from deerflow.config.database_config import DatabaseConfig


def write_config(path: Path, database: DatabaseConfig, mode: str = "delta", snapshot_frequency: int = 10) -> Path:
    """Write a config.yaml with DeerFlow's own ``database:`` keys for ``database`` in ``mode``; returns ``path``.

    Args:
        path: the file to write (its folder must exist).
        database: the checkpoint database (sqlite, postgres or memory).
        mode: ``checkpoint_channel_mode`` (``full`` or ``delta``).
        snapshot_frequency: ``checkpoint_delta.snapshot_frequency`` (count).
    """
    block: dict[str, Any] = {"backend": database.backend, "checkpoint_channel_mode": mode,
                             "checkpoint_delta": {"snapshot_frequency": snapshot_frequency}}
    if database.backend == "sqlite":
        block["sqlite_dir"] = database.sqlite_dir
    if database.backend == "postgres":
        block["postgres_url"] = database.postgres_url
    cache = database.checkpoint_cache.model_dump(exclude_defaults=True)
    if cache:
        block["checkpoint_cache"] = cache
    path.write_text(yaml.safe_dump({"database": block}), encoding="utf-8")
    return path
