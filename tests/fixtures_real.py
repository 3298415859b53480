"""Helpers to load the real DeerFlow fixture (tests/fixtures/deerflow-real).

The manifest is the oracle: per backend, every checkpoint's materialized
message count and digest. The SQLite file and Postgres dump are restored
into throwaway locations so the committed copies stay byte-identical.
"""

from __future__ import annotations

import atexit
import gzip
import json
import subprocess
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "deerflow-real"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@lru_cache(maxsize=1)
def load_manifest() -> dict[str, Any]:
    """The fixture manifest (parsed once per test process)."""
    with gzip.open(FIXTURE_DIR / "manifest.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


def manifest_threads() -> dict[str, dict[str, Any]]:
    """Manifest threads by thread id."""
    return {t["thread_id"]: t for t in load_manifest()["threads"]}


#: How many parts the whole-fixture sweeps are cut into (each part is one test, so pytest-xdist
#: spreads a sweep over its workers instead of one worker running it for minutes).
SWEEP_SHARDS = 4


def checkpoint_shard(index: int, backend: str = "sqlite", of: int = SWEEP_SHARDS) -> dict[str, list[dict[str, Any]]]:
    """The manifest checkpoints of sweep part ``index`` (0-based, of ``of``): ``{thread_id: [checkpoint, ...]}``.

    Each thread's checkpoints (manifest order: by namespace, newest first) are dealt round-robin over
    the parts, starting at part ``position % of`` for the thread at ``position`` in the manifest: every
    part holds about a quarter of every thread, so the longest thread (1,200 checkpoints, whose readings
    cost the most) no longer makes one part several times longer than the others. Every manifest
    checkpoint is in exactly one part (``tests/deerflow/runtime/test_fixture_sweep.py`` checks this).

    Raises:
        ValueError: ``index`` is not in ``range(of)``.
    """
    if not 0 <= index < of:
        raise ValueError(f"sweep part {index} is not in 0..{of - 1}")
    out: dict[str, list[dict[str, Any]]] = {}
    for position, thread in enumerate(load_manifest()["threads"]):
        mine = [cp for i, cp in enumerate(thread["backends"][backend]["checkpoints"]) if (position + i) % of == index]
        if mine:
            out[thread["thread_id"]] = mine
    return out


def shard_of_thread(thread_id: str, of: int = SWEEP_SHARDS) -> int:
    """The sweep part that holds ``thread_id``'s first manifest checkpoint (its whole-thread checks go there)."""
    position = next(i for i, t in enumerate(load_manifest()["threads"]) if t["thread_id"] == thread_id)
    return position % of


@lru_cache(maxsize=1)
def _sqlite_bytes() -> bytes:
    """The fixture SQLite file, decompressed once per test process (27 MB)."""
    with gzip.open(FIXTURE_DIR / "sqlite.db.gz", "rb") as src:
        return src.read()


def restore_sqlite(directory: Path) -> Path:
    """Write the fixture SQLite file to ``directory/deerflow.db``; returns the file path."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "deerflow.db"
    target.write_bytes(_sqlite_bytes())
    return target


def create_database(prefix: str = "dfa_test", *, template: str | None = None) -> tuple[str, str]:
    """Create a Postgres database, empty or a copy of ``template``; returns (name, url)."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    return name, f"postgresql://postgres@127.0.0.1:5432/{name}"


_fixture_template: list[str] = []


def create_fixture_database(prefix: str) -> tuple[str, str]:
    """A new Postgres database holding the fixture dump; returns (name, url). Drop it with :func:`drop_database`.

    The dump is restored with psql once per test process into a template database (dropped when the process
    exits; nothing ever connects to it after the restore) and each call copies it with
    ``CREATE DATABASE ... TEMPLATE``: about 0.3 s instead of 5 s for psql on this 2-core machine, the same rows.
    """
    if not _fixture_template:
        name, url = create_database("dfa_fixture_template")
        try:
            restore_postgres(url)
        except BaseException:
            drop_database(name)
            raise
        _fixture_template.append(name)
        atexit.register(drop_database, name)
    return create_database(prefix, template=_fixture_template[0])


def drop_database(name: str) -> None:
    """Drop a database made by :func:`create_database` (terminating its connections)."""
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def restore_postgres(url: str) -> None:
    """Load the fixture's plain-SQL dump into the (empty) database at ``url`` with psql."""
    with gzip.open(FIXTURE_DIR / "postgres.sql.gz", "rb") as src:
        sql = src.read()
    subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", url],
        input=sql, check=True, capture_output=True,
    )
