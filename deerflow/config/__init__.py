"""DeerFlow ``config.yaml`` loading (the ``database:`` block)."""

from deerflow.config.database_config import CheckpointCacheConfig, CheckpointDeltaConfig, DatabaseConfig
from deerflow.config.loader import LoadedConfig, config_path_from_env, load_config

__all__ = [
    "CheckpointCacheConfig",
    "CheckpointDeltaConfig",
    "DatabaseConfig",
    "LoadedConfig",
    "config_path_from_env",
    "load_config",
]
