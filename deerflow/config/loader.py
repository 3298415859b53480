"""Load and validate DeerFlow's ``config.yaml``.

The path comes from ``DEER_FLOW_CONFIG_PATH``, else ``./config.yaml`` (spec,
"Facts from DeerFlow's configuration"). Only the ``database:`` block is read;
every other DeerFlow section is ignored. Any problem raises
:class:`~deerflow.errors.ConfigError` naming the file, the key and the
allowed values, so a process never starts half-configured.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from deerflow.config.database_config import DatabaseConfig
from deerflow.errors import ConfigError

__all__ = ["CONFIG_PATH_ENV", "LoadedConfig", "config_path_from_env", "load_config"]

CONFIG_PATH_ENV = "DEER_FLOW_CONFIG_PATH"
_ENV_REF = re.compile(r"^\$(\{)?([A-Za-z_][A-Za-z0-9_]*)(?(1)\})$")

_ALLOWED = {
    "backend": "'memory', 'sqlite' or 'postgres'",
    "checkpoint_channel_mode": "'full' or 'delta'",
    "snapshot_frequency": "an integer >= 1 (default 10)",
    "postgres_url": "a postgresql:// URL or $ENV_VAR",
    "max_entries": "an integer >= 0 (0 disables the cache)",
    "ttl_seconds": "an integer >= 0 (0: no expiry)",
}


@dataclass(frozen=True)
class LoadedConfig:
    """A parsed config.yaml and the facts needed to detect drift later.

    Attributes:
        path: absolute path of the file read.
        sha256: SHA-256 (hex) of the file's bytes.
        mtime_ns: modification time in nanoseconds when read.
        size: file size in bytes when read.
        database: the validated ``database:`` block, ``$VAR`` references resolved.
    """

    path: Path
    sha256: str
    mtime_ns: int
    size: int
    database: DatabaseConfig

    @property
    def mode(self) -> str:
        """``database.checkpoint_channel_mode``."""
        return self.database.checkpoint_channel_mode

    @property
    def snapshot_frequency(self) -> int:
        """``database.checkpoint_delta.snapshot_frequency``."""
        return self.database.snapshot_frequency


def config_path_from_env(environ: dict[str, str] | None = None) -> Path:
    """``$DEER_FLOW_CONFIG_PATH`` if set and non-empty, else ``./config.yaml`` (absolute)."""
    env = os.environ if environ is None else environ
    raw = env.get(CONFIG_PATH_ENV) or "config.yaml"
    return Path(raw).expanduser().resolve()


def _resolve_env(value: Any, key: str, path: Path, environ: dict[str, str]) -> Any:
    if not isinstance(value, str):
        return value
    match = _ENV_REF.match(value.strip())
    if not match:
        return value
    name = match.group(2)
    if not environ.get(name):
        raise ConfigError(
            f"{path}: database.{key} is {value!r} but environment variable {name} is not set "
            f"(or empty). Export {name} or write the value into the file.",
            path=str(path),
            key=f"database.{key}",
        )
    return environ[name]


_LEGACY_FREQUENCY_KEY = "checkpoint_delta_snapshot_frequency"
_MODEL_ERROR_KEYS = {
    # model-level (loc-less) errors, keyed by a phrase of their message
    "postgres_url": "postgres_url",
}


def _error_key(item: ErrorDetails) -> tuple[str, str]:
    """(dotted key under ``database``, leaf name) of one pydantic error."""
    loc = [str(p) for p in item["loc"]]
    if not loc:
        message = str(item.get("msg", ""))
        for phrase, key in _MODEL_ERROR_KEYS.items():
            if phrase in message:
                return key, key
        return "", ""
    return ".".join(loc), loc[-1]


def _validation_message(path: Path, error: ValidationError, block: dict[str, Any]) -> tuple[str, str]:
    """The ConfigError text for a pydantic error, and the first offending key."""
    lines = []
    keys = []
    legacy_used = _LEGACY_FREQUENCY_KEY in block and not (
        isinstance(block.get("checkpoint_delta"), dict)
        and "snapshot_frequency" in block["checkpoint_delta"]
    )
    for item in error.errors():
        key, leaf = _error_key(item)
        dotted = f"database.{key}" if key else "database"
        keys.append(dotted)
        message = str(item["msg"]).removeprefix("Value error, ")
        text = f"{dotted}: {message}"
        if key == "checkpoint_delta.snapshot_frequency" and legacy_used:
            text += f" (set through the legacy key database.{_LEGACY_FREQUENCY_KEY})"
        allowed = _ALLOWED.get(leaf)
        if allowed and allowed not in message:  # pydantic's literal errors already list the choices
            text += f"; allowed: {allowed}"
        got = item.get("input")
        if item["loc"] and not isinstance(got, dict):
            text += f"; got {got!r}"
        lines.append(text)
    return f"{path}: invalid database settings: " + " | ".join(lines), keys[0] if keys else "database"


def load_config(path: str | os.PathLike[str] | None = None, environ: dict[str, str] | None = None) -> LoadedConfig:
    """Read, parse and validate config.yaml.

    Args:
        path: file to read; default :func:`config_path_from_env`.
        environ: environment for ``$VAR`` resolution; default ``os.environ``.

    Returns:
        A :class:`LoadedConfig`.

    Raises:
        ConfigError: the file is missing, unreadable, empty, not YAML, not a
            mapping, or a ``database`` key is invalid; the message names the
            file, the key and the allowed values.
    """
    env = dict(os.environ if environ is None else environ)
    file = Path(path).expanduser().resolve() if path is not None else config_path_from_env(env)
    try:
        data = file.read_bytes()
        stat = file.stat()
    except FileNotFoundError:
        raise ConfigError(
            f"{file}: config file not found. Set {CONFIG_PATH_ENV} to your DeerFlow config.yaml "
            f"or create ./config.yaml with a 'database:' block "
            f"(backend: {_ALLOWED['backend']}; checkpoint_channel_mode: {_ALLOWED['checkpoint_channel_mode']}).",
            path=str(file),
        ) from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read config file: {exc.strerror}", path=str(file)) from exc
    try:
        document = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: config file is not UTF-8 text ({exc.reason} at byte {exc.start})",
                          path=str(file)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{file}: config file is not valid YAML{where}: {getattr(exc, 'problem', exc)}",
                          path=str(file)) from exc
    if document is None:
        raise ConfigError(f"{file}: config file is empty; it needs a 'database:' block.",
                          path=str(file), key="database")
    if not isinstance(document, dict):
        raise ConfigError(f"{file}: top level must be a mapping with a 'database:' key, "
                          f"got {type(document).__name__}.", path=str(file), key="database")
    block = document.get("database")
    if block is None:
        block = {}
    if not isinstance(block, dict):
        raise ConfigError(f"{file}: 'database' must be a mapping, got {type(block).__name__}.",
                          path=str(file), key="database")
    block = {k: _resolve_env(v, k, file, env) for k, v in block.items()}
    cache = block.get("checkpoint_cache")
    if isinstance(cache, dict):
        block["checkpoint_cache"] = {k: _resolve_env(v, f"checkpoint_cache.{k}", file, env) for k, v in cache.items()}
    try:
        database = DatabaseConfig.model_validate(block)
    except ValidationError as exc:
        message, key = _validation_message(file, exc, block)
        raise ConfigError(message, path=str(file), key=key) from exc
    return LoadedConfig(
        path=file,
        sha256=hashlib.sha256(data).hexdigest(),
        mtime_ns=stat.st_mtime_ns,
        size=stat.st_size,
        database=database,
    )
