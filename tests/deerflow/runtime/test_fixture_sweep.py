"""The whole real DeerFlow fixture, every thread and every checkpoint, on SQLite and Postgres.

The manifest is the oracle (tests/fixtures/deerflow-real/README.md). For each
checkpoint: the raw saver tuple holds what ``messages_stored`` says (the
storage shape), the stored metadata carries the recorded marker facts, a
delta-mode accessor materializes the manifest's ``messages_sha256`` and
``channels_sha256`` (and title), and a full-mode accessor does what
``full_mode_accessor`` says. (``next`` is not compared: it depends on the
reading graph's nodes, and the accessor reads through the one-node
state-mutation graph, not DeerFlow's agent graph.) Failures are collected and
reported together, one line per checkpoint.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert.digest import channels_sha256, messages_sha256
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, CheckpointModeMismatchError
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.savers import open_async_checkpointer, open_checkpointer
from tests import fixtures_real
from tests.deerflow.support import config_for

RAISES = "raises CheckpointModeMismatchError"


def _stored_kind(raw: Any) -> str:
    if raw is None:
        return "absent"
    if isinstance(raw, _DeltaSnapshot):
        return "delta_snapshot"
    assert isinstance(raw, list), type(raw)
    return "plain"


def _full_mode_reading(accessor: CheckpointStateAccessor, config: dict[str, Any]) -> Any:
    try:
        values = accessor.get(config).values
    except CheckpointModeMismatchError:
        return RAISES
    messages = values.get("messages", [])
    return {"message_count": len(messages), "messages_sha256": messages_sha256(messages)}


def _sweep(database: Any, backend: str, manifest: dict[str, Any], shard: int) -> tuple[int, list[str]]:
    """Read every checkpoint of sweep part ``shard`` (:func:`tests.fixtures_real.checkpoint_shard`);
    ``(readings, failures)``. The part that holds a thread's first checkpoint also lists each of its
    namespaces (one ``list()`` each) and checks their order against the manifest's."""
    part = fixtures_real.checkpoint_shard(shard, backend)
    failures: list[str] = []
    readings = 0
    with open_checkpointer(database) as saver:
        delta = CheckpointStateAccessor.for_saver(saver, mode="delta")
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        for thread in (t for t in manifest["threads"] if t["thread_id"] in part):
            thread_id = thread["thread_id"]
            checkpoints = thread["backends"][backend]["checkpoints"]
            assert len(checkpoints) == thread["backends"][backend]["checkpoint_count"]
            if fixtures_real.shard_of_thread(thread_id) == shard:
                # raw saver tuples' order (one list() per namespace) equals the manifest's (newest first)
                for ns in dict.fromkeys(cp["checkpoint_ns"] for cp in checkpoints):
                    listed = [t.config["configurable"]["checkpoint_id"]
                              for t in saver.list(config_for(thread_id, checkpoint_ns=ns))]
                    if listed != [cp["checkpoint_id"] for cp in checkpoints if cp["checkpoint_ns"] == ns]:
                        failures.append(f"{backend} {thread_id} ns={ns!r}: list order differs")
            for cp in part[thread_id]:
                where = (f"{backend} {thread_id} {cp['checkpoint_ns'] or '<root>'} {cp['checkpoint_id']} "
                         f"step={cp['step']}")
                config = config_for(thread_id, cp["checkpoint_id"], cp["checkpoint_ns"])
                raw = saver.get_tuple(config)
                kind = _stored_kind(raw.checkpoint["channel_values"].get("messages"))
                if kind != cp["messages_stored"]:
                    failures.append(f"{where}: raw messages {kind} != {cp['messages_stored']}")
                marker = raw.metadata.get(CHECKPOINT_MODE_METADATA_KEY) == "delta"
                if (marker != cp["delta_marker"]
                        or raw.metadata.get("counters_since_delta_snapshot") != cp["counters_since_delta_snapshot"]):
                    failures.append(f"{where}: marker facts differ")
                snapshot = delta.get(config)
                readings += 1
                messages = snapshot.values.get("messages", [])
                got = (len(messages), messages_sha256(messages), channels_sha256(snapshot.values))
                want = (cp["message_count"], cp["messages_sha256"], cp["channels_sha256"])
                if got != want:
                    failures.append(f"{where}: delta accessor {got} != manifest {want}")
                if snapshot.values.get("title") != cp["title"]:
                    failures.append(f"{where}: title {snapshot.values.get('title')!r} != {cp['title']!r}")
                full_reading = _full_mode_reading(full, config)
                readings += 1
                if full_reading != cp["full_mode_accessor"]:
                    failures.append(f"{where}: full accessor {full_reading} != manifest {cp['full_mode_accessor']}")
    return readings, failures


#: One test per sweep part (tests.fixtures_real.checkpoint_shard), so pytest-xdist spreads the sweep over its
#: workers.
SHARDS = [pytest.param(i, id=f"part{i}") for i in range(fixtures_real.SWEEP_SHARDS)]


def _checkpoints(backend: str, shard: int) -> int:
    return sum(len(cps) for cps in fixtures_real.checkpoint_shard(shard, backend).values())


@pytest.mark.slow
@pytest.mark.parametrize("shard", SHARDS)
def test_every_checkpoint_on_sqlite(sqlite_fixture_db, manifest, shard):
    readings, failures = _sweep(sqlite_fixture_db, "sqlite", manifest, shard)
    assert readings == 2 * _checkpoints("sqlite", shard) > 0
    assert failures == [], "\n".join(failures[:50])


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("shard", SHARDS)
def test_every_checkpoint_on_postgres(postgres_fixture_db, manifest, shard):
    readings, failures = _sweep(postgres_fixture_db, "postgres", manifest, shard)
    assert readings == 2 * _checkpoints("postgres", shard) > 0
    assert failures == [], "\n".join(failures[:50])


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_sweep_parts_hold_every_manifest_checkpoint_once(backend):
    parts = [fixtures_real.checkpoint_shard(i, backend) for i in range(fixtures_real.SWEEP_SHARDS)]
    held = sorted((tid, cp["checkpoint_ns"], cp["checkpoint_id"]) for part in parts for tid, cps in part.items()
                  for cp in cps)
    every = sorted((t["thread_id"], cp["checkpoint_ns"], cp["checkpoint_id"])
                   for t in fixtures_real.load_manifest()["threads"] for cp in t["backends"][backend]["checkpoints"])
    assert held == every and len(every) == 3268
    sizes = [sum(len(cps) for cps in part.values()) for part in parts]
    assert max(sizes) - min(sizes) <= 27  # at most one checkpoint more per thread
    assert max(len(part.get("delta-f100-150t", [])) for part in parts) == 300  # the longest thread, in quarters
    # each thread's list-order check runs in exactly one part, one that holds the thread
    for thread in fixtures_real.load_manifest()["threads"]:
        assert thread["thread_id"] in parts[fixtures_real.shard_of_thread(thread["thread_id"])]
    with pytest.raises(ValueError, match="sweep part 4 is not in 0..3"):
        fixtures_real.checkpoint_shard(fixtures_real.SWEEP_SHARDS, backend)


SAMPLE = [  # every category; the migration itself is also written and read by test_storage_shape
    "full-compaction", "full-untrusted-content", "delta-f10-remove-all", "delta-f10-compaction",
    "delta-f10-fanout", "delta-f10-fork", "delta-f10-fork-from-input", "delta-f10-subgraph",
    "markerless-delta-f10-13t", "delta-f10-untrusted-content", "delta-empty", "full-empty",
]


def _sync_vs_async(database: Any, backend: str, manifest: dict[str, Any]) -> list[str]:
    threads = {t["thread_id"]: t for t in manifest["threads"]}
    failures: list[str] = []
    sync_readings: dict[tuple[str, str], tuple[Any, ...]] = {}
    sync_histories: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    with open_checkpointer(database) as saver:
        delta = CheckpointStateAccessor.for_saver(saver, mode="delta")
        for thread_id in SAMPLE:
            for cp in threads[thread_id]["backends"][backend]["checkpoints"]:
                s = delta.get(config_for(thread_id, cp["checkpoint_id"], cp["checkpoint_ns"]))
                sync_readings[(thread_id, cp["checkpoint_id"])] = (messages_sha256(s.values.get("messages")),
                                                                    channels_sha256(s.values))
            for ns in dict.fromkeys(cp["checkpoint_ns"]
                                    for cp in threads[thread_id]["backends"][backend]["checkpoints"]):
                sync_histories[(thread_id, ns)] = [
                    (s.config["configurable"]["checkpoint_id"], messages_sha256(s.values.get("messages")),
                     channels_sha256(s.values))
                    for s in delta.history(config_for(thread_id, checkpoint_ns=ns))
                ]

    async def read_async() -> None:
        async with open_async_checkpointer(database) as saver:
            adelta = CheckpointStateAccessor.for_saver(saver, mode="delta")
            afull = CheckpointStateAccessor.for_saver(saver, mode="full")
            for thread_id in SAMPLE:
                checkpoints = threads[thread_id]["backends"][backend]["checkpoints"]
                for cp in checkpoints:
                    config = config_for(thread_id, cp["checkpoint_id"], cp["checkpoint_ns"])
                    s = await adelta.aget(config)
                    got = (messages_sha256(s.values.get("messages")), channels_sha256(s.values))
                    if (got != sync_readings[(thread_id, cp["checkpoint_id"])]
                            or got != (cp["messages_sha256"], cp["channels_sha256"])):
                        failures.append(f"{backend} {thread_id} {cp['checkpoint_id']}: aget {got}")
                    metadata = (await afull.aget_metadata(config)
                                if not cp["delta_marker"] and not cp["counters_since_delta_snapshot"] else None)
                    if metadata is not None and metadata.get("step") != cp["step"]:
                        failures.append(f"{backend} {thread_id} {cp['checkpoint_id']}: aget_metadata step")
                for ns in dict.fromkeys(cp["checkpoint_ns"] for cp in checkpoints):
                    history = [
                        (s.config["configurable"]["checkpoint_id"], messages_sha256(s.values.get("messages")),
                         channels_sha256(s.values))
                        for s in await adelta.ahistory(config_for(thread_id, checkpoint_ns=ns))
                    ]
                    expected = [(cp["checkpoint_id"], cp["messages_sha256"], cp["channels_sha256"])
                                for cp in checkpoints if cp["checkpoint_ns"] == ns]
                    if history != sync_histories[(thread_id, ns)] or history != expected:
                        failures.append(f"{backend} {thread_id} ns={ns!r}: ahistory differs from history/manifest")

    asyncio.run(read_async())
    return failures


@pytest.mark.slow
def test_sync_and_async_agree_on_a_sample_sqlite(sqlite_fixture_db, manifest):
    failures = _sync_vs_async(sqlite_fixture_db, "sqlite", manifest)
    assert failures == [], "\n".join(failures[:50])


@pytest.mark.slow
@pytest.mark.postgres
def test_sync_and_async_agree_on_a_sample_postgres(postgres_fixture_db, manifest):
    failures = _sync_vs_async(postgres_fixture_db, "postgres", manifest)
    assert failures == [], "\n".join(failures[:50])
