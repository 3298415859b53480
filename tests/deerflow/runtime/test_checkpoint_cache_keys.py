"""DeerFlow's history-cache keys as DeerFlow derives them (``runtime/checkpoint_cache/base.py`` and
``provider.py``): the prefix from the database identity, the thread stem, the escape of glob characters."""

from __future__ import annotations

import hashlib
import os

import pytest

from deerflow.config.database_config import CheckpointCacheConfig, DatabaseConfig
from deerflow.runtime.checkpoint_cache import (
    checkpoint_cache_db_hash,
    checkpoint_cache_key_prefix,
    make_history_key,
    resolve_redis_url,
    thread_key_stem,
)
from deerflow.runtime.checkpoint_cache.purge import _glob_escape


def _h(identity: str) -> str:
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


@pytest.mark.parametrize("url, identity", [
    ("postgresql://user:secret@db.example:6543/deerflow", "postgres:db.example:6543/deerflow:"),
    ("postgresql://user:other@db.example:6543/deerflow", "postgres:db.example:6543/deerflow:"),  # rotation
    ("postgresql://db.example/deerflow", "postgres:db.example:5432/deerflow:"),
    ("postgresql:///deerflow", "postgres:localhost:5432/deerflow:"),
    ("postgresql://u@[::1]:5433/d%20b", "postgres:::1:5433/d b:"),
])
def test_the_postgres_prefix_hashes_host_port_database_and_schema_only(url, identity):
    db = DatabaseConfig(backend="postgres", postgres_url=url)
    assert checkpoint_cache_db_hash(db) == _h(identity)
    assert checkpoint_cache_key_prefix(db) == f"ckpt-hist:v1:{_h(identity)}"
    with_schema = DatabaseConfig(backend="postgres", postgres_url=url, postgres_schema="tenant_a")
    assert checkpoint_cache_db_hash(with_schema) == _h(identity + "tenant_a")


def test_the_sqlite_prefix_hashes_the_absolute_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = DatabaseConfig(backend="sqlite", sqlite_dir=".deer-flow/data")
    expected = os.path.join(os.path.realpath(tmp_path / ".deer-flow/data"), "deerflow.db")
    assert checkpoint_cache_db_hash(db) == _h(f"sqlite:{expected}")


def test_an_explicit_key_prefix_wins_and_keys_fall_under_the_thread_stem():
    db = DatabaseConfig(backend="sqlite", checkpoint_cache=CheckpointCacheConfig(type="redis", key_prefix="p"))
    assert checkpoint_cache_key_prefix(db) == "p"
    key = make_history_key("p", "t-1", "ns:1", "cid", "messages")
    assert key.startswith(thread_key_stem("p", "t-1")) and key == "p:t-1:" + hashlib.sha256(
        b"ns:1\x00cid\x00messages").hexdigest()[:24]


def test_the_redis_url_falls_back_as_deerflows_does():
    config = CheckpointCacheConfig(type="redis")
    assert resolve_redis_url(config, {}) == "redis://localhost:6379/0"
    assert resolve_redis_url(config, {"REDIS_URL": "redis://r:1/2"}) == "redis://r:1/2"
    assert resolve_redis_url(config, {"REDIS_URL": "redis://r:1/2",
                                      "DEER_FLOW_CHECKPOINT_CACHE_REDIS_URL": "redis://c:3/4"}) == "redis://c:3/4"
    assert resolve_redis_url(CheckpointCacheConfig(redis_url="redis://x:5/6"), {}) == "redis://x:5/6"


def test_glob_characters_in_a_thread_id_match_only_themselves():
    assert _glob_escape("a*b?c[d]e\\f") == "a\\*b\\?c\\[d\\]e\\\\f"


def test_bad_cache_settings_are_refused_with_the_key(tmp_path):
    from deerflow.config import load_config
    from deerflow.errors import ConfigError

    path = tmp_path / "config.yaml"
    path.write_text("database:\n  backend: sqlite\n  checkpoint_cache:\n    type: disk\n")
    with pytest.raises(ConfigError, match="checkpoint_cache.type"):
        load_config(path)
    path.write_text("database:\n  backend: sqlite\n  checkpoint_cache:\n    max_entries: -1\n")
    with pytest.raises(ConfigError, match="checkpoint_cache.max_entries"):
        load_config(path)
    path.write_text("database:\n  backend: sqlite\n  checkpoint_cache:\n    type: redis\n    redis_url: $NO_SUCH_VAR\n")
    with pytest.raises(ConfigError, match="NO_SUCH_VAR"):
        load_config(path, environ={})
    path.write_text("database:\n  backend: sqlite\n  checkpoint_cache:\n    type: redis\n    redis_url: $R\n")
    assert load_config(path, environ={"R": "redis://h:1/3"}).database.checkpoint_cache.redis_url == "redis://h:1/3"
