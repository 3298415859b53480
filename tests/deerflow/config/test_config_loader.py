"""deerflow.config: DeerFlow's config.yaml ``database:`` block.

Spec, "Facts from DeerFlow's configuration". Every error is a ConfigError
whose message names the file, the key and (for value errors) the allowed
values, so an operator can fix the file without reading code.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from deerflow.config import (
    CheckpointDeltaConfig,
    DatabaseConfig,
    LoadedConfig,
    config_path_from_env,
    load_config,
)
from deerflow.errors import ConfigError
from tests.fixtures_real import FIXTURE_DIR


def _write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=environ or {})
    assert isinstance(info.value, ValueError)
    assert str(path.resolve()) in str(info.value)  # the message names the file
    assert info.value.path == str(path.resolve())
    return info.value


# -- valid files ------------------------------------------------------------------


def test_defaults_and_full_block(tmp_path):
    loaded = load_config(_write(tmp_path, "database:\n  backend: memory\n"), environ={})
    assert isinstance(loaded, LoadedConfig)
    db = loaded.database
    assert (db.backend, db.checkpoint_channel_mode, db.snapshot_frequency) == ("memory", "full", 10)
    assert loaded.mode == "full" and loaded.snapshot_frequency == 10
    assert db.checkpoint_delta == CheckpointDeltaConfig(snapshot_frequency=10)

    text = (
        "title: ignored\n"
        "models: [whatever]\n"
        "database:\n"
        "  backend: sqlite\n"
        "  sqlite_dir: /srv/deerflow/data\n"
        "  postgres_schema: deer\n"
        "  checkpoint_channel_mode: delta\n"
        "  checkpoint_delta:\n"
        "    snapshot_frequency: 25\n"
        "  some_future_key: 1\n"
    )
    path = _write(tmp_path, text)
    loaded = load_config(path, environ={})
    assert loaded.mode == "delta" and loaded.snapshot_frequency == 25
    assert loaded.database.sqlite_path() == Path("/srv/deerflow/data/deerflow.db")  # {sqlite_dir}/deerflow.db
    assert loaded.database.postgres_schema == "deer"
    assert loaded.path == path.resolve()
    assert loaded.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert loaded.size == len(text.encode()) and loaded.mtime_ns == path.stat().st_mtime_ns


def test_relative_sqlite_dir_resolves_against_a_base(tmp_path):
    db = DatabaseConfig(backend="sqlite", sqlite_dir=".deer-flow/data")
    assert db.sqlite_path() == Path(".deer-flow/data/deerflow.db")
    assert db.sqlite_path(tmp_path) == tmp_path / ".deer-flow/data/deerflow.db"


def test_missing_database_block_uses_defaults(tmp_path):
    loaded = load_config(_write(tmp_path, "title: x\n"), environ={})
    assert loaded.mode == "full" and loaded.database.backend == "sqlite"


def test_path_comes_from_the_environment_else_the_working_directory(tmp_path, monkeypatch):
    elsewhere = _write(tmp_path, "database:\n  backend: memory\n  checkpoint_channel_mode: delta\n", "other.yaml")
    assert config_path_from_env({"DEER_FLOW_CONFIG_PATH": str(elsewhere)}) == elsewhere.resolve()
    assert load_config(environ={"DEER_FLOW_CONFIG_PATH": str(elsewhere)}).mode == "delta"
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "database:\n  backend: memory\n")
    assert config_path_from_env({}) == (tmp_path / "config.yaml").resolve()
    assert config_path_from_env({"DEER_FLOW_CONFIG_PATH": ""}) == (tmp_path / "config.yaml").resolve()
    assert load_config(environ={}).mode == "full"
    monkeypatch.setenv("DEER_FLOW_CONFIG_PATH", str(elsewhere))
    assert load_config().mode == "delta"  # os.environ by default


def test_env_reference_is_resolved(tmp_path):
    path = _write(tmp_path, "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n")
    loaded = load_config(path, environ={"DATABASE_URL": "postgresql://u@h:5432/db"})
    assert loaded.database.postgres_url == "postgresql://u@h:5432/db"
    braced = _write(tmp_path, "database:\n  backend: postgres\n  postgres_url: ${PG}\n", "braced.yaml")
    assert load_config(braced, environ={"PG": "postgresql://x/y"}).database.postgres_url == "postgresql://x/y"
    # a dollar inside a value is not a reference
    literal = _write(tmp_path, "database:\n  backend: postgres\n  postgres_url: postgresql://u:pa$$@h/db\n", "lit.yaml")
    assert load_config(literal, environ={}).database.postgres_url == "postgresql://u:pa$$@h/db"


def test_fixture_config_fragments_load(tmp_path):
    environ = {"DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/x"}
    full = load_config(FIXTURE_DIR / "config.full.yaml", environ=environ)
    delta = load_config(FIXTURE_DIR / "config.delta.yaml", environ=environ)
    assert (full.mode, delta.mode) == ("full", "delta")
    assert full.snapshot_frequency == delta.snapshot_frequency == 10
    assert full.database.backend == "postgres" and full.database.postgres_url == environ["DATABASE_URL"]
    assert full.database.sqlite_dir == ".deer-flow/data"


def test_legacy_flat_cadence_key_is_carried_and_nested_wins(tmp_path):
    legacy = _write(tmp_path, "database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta_snapshot_frequency: 7\n",
                    "a.yaml")
    assert load_config(legacy, environ={}).snapshot_frequency == 7
    both = _write(
        tmp_path,
        "database:\n  checkpoint_delta_snapshot_frequency: 7\n  checkpoint_delta:\n    snapshot_frequency: 3\n",
        "b.yaml",
    )
    assert load_config(both, environ={}).snapshot_frequency == 3
    null_nested = _write(tmp_path, "database:\n  checkpoint_delta_snapshot_frequency: 5\n  checkpoint_delta:\n",
                         "c.yaml")
    assert load_config(null_nested, environ={}).snapshot_frequency == 5
    assert DatabaseConfig.model_validate({"checkpoint_delta_snapshot_frequency": 4}).snapshot_frequency == 4


# -- errors ------------------------------------------------------------------------


def test_missing_file(tmp_path):
    error = _error(tmp_path / "nope.yaml")
    text = str(error)
    assert "config file not found" in text
    assert "DEER_FLOW_CONFIG_PATH" in text and "database:" in text
    assert "'full' or 'delta'" in text and "'memory', 'sqlite' or 'postgres'" in text


def test_empty_file(tmp_path):
    error = _error(_write(tmp_path, ""))
    assert "empty" in str(error) and "'database:'" in str(error)
    assert error.key == "database"
    error = _error(_write(tmp_path, "# only a comment\n", "comment.yaml"))
    assert "empty" in str(error)


def test_malformed_yaml(tmp_path):
    error = _error(_write(tmp_path, "database:\n  backend: [sqlite\n"))
    assert "not valid YAML" in str(error) and "line" in str(error)


def test_not_utf8(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"database:\n  backend: \xff\xfe\n")
    assert "not UTF-8" in str(_error(path))


def test_unreadable_file(tmp_path):
    directory = tmp_path / "config.yaml"
    directory.mkdir()  # unreadable as a file, even for root
    assert "cannot read config file" in str(_error(directory))


def test_top_level_list(tmp_path):
    error = _error(_write(tmp_path, "- database\n- backend\n"))
    assert "top level must be a mapping" in str(error) and "'database:'" in str(error) and "list" in str(error)


@pytest.mark.parametrize("body", ["database: [sqlite]\n", "database: sqlite\n", "database: 3\n"])
def test_database_not_a_mapping(tmp_path, body):
    error = _error(_write(tmp_path, body))
    assert "'database' must be a mapping" in str(error)
    assert error.key == "database"


def test_unknown_mode(tmp_path):
    error = _error(_write(tmp_path, "database:\n  checkpoint_channel_mode: fast\n"))
    text = str(error)
    assert "database.checkpoint_channel_mode: Input should be 'full' or 'delta'; got 'fast'" in text
    assert text.count("'full' or 'delta'") == 1  # the choices once, not twice
    assert error.key == "database.checkpoint_channel_mode"


def test_unknown_backend(tmp_path):
    error = _error(_write(tmp_path, "database:\n  backend: mysql\n"))
    assert ("database.backend" in str(error) and "'memory', 'sqlite' or 'postgres'" in str(error)
            and "'mysql'" in str(error))


@pytest.mark.parametrize(("value", "shown"),
                         [("0", "0"), ("-1", "-1"), ("ten", "'ten'"), ("true", "True"), ("2.5", "2.5")])
def test_bad_cadence(tmp_path, value, shown):
    error = _error(_write(tmp_path, f"database:\n  checkpoint_delta:\n    snapshot_frequency: {value}\n"))
    text = str(error)
    assert "database.checkpoint_delta.snapshot_frequency" in text
    assert "allowed: an integer >= 1 (default 10)" in text
    assert f"got {shown}" in text
    assert error.key == "database.checkpoint_delta.snapshot_frequency"


def test_bad_legacy_cadence_names_the_legacy_key(tmp_path):
    error = _error(_write(tmp_path, "database:\n  checkpoint_delta_snapshot_frequency: 0\n"))
    text = str(error)
    assert "database.checkpoint_delta.snapshot_frequency" in text
    assert "legacy key database.checkpoint_delta_snapshot_frequency" in text
    assert "allowed: an integer >= 1" in text


def test_bad_nested_block_with_legacy_key_is_a_config_error(tmp_path):
    error = _error(_write(tmp_path, "database:\n  checkpoint_delta_snapshot_frequency: 5\n  checkpoint_delta: 7\n"))
    assert "database.checkpoint_delta" in str(error) and error.key == "database.checkpoint_delta"


def test_unset_env_reference(tmp_path):
    error = _error(_write(tmp_path, "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n"))
    text = str(error)
    assert "database.postgres_url" in text and "DATABASE_URL" in text and "not set" in text
    assert error.key == "database.postgres_url"
    error = _error(_write(tmp_path, "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n", "e.yaml"),
                   environ={"DATABASE_URL": ""})
    assert "not set" in str(error)


def test_postgres_without_url(tmp_path):
    error = _error(_write(tmp_path, "database:\n  backend: postgres\n"))
    text = str(error)
    assert "database.postgres_url" in text and "backend is 'postgres'" in text
    assert "allowed: a postgresql:// URL or $ENV_VAR" in text
    assert "database.database" not in text
    assert error.key == "database.postgres_url"


def test_several_errors_are_all_reported(tmp_path):
    error = _error(_write(tmp_path, "database:\n  backend: mysql\n  checkpoint_channel_mode: fast\n"))
    assert "database.backend" in str(error) and "database.checkpoint_channel_mode" in str(error)
    assert error.key == "database.backend"
