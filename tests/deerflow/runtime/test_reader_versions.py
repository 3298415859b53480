"""Versions that read correctly (fixture README, "Two readers"), one test per bug kind.

DeerFlow's lock pins LangGraph releases with reader bugs; the manifest records
what that lock reader returned (``deerflow_lock_reader``). Each test reads the
fixture threads that show one bug, proves the installed releases return the
primary (correct) values, and that those differ from the lock reader's. The
last tests check that pyproject requires the fixing releases and that the
installed ones satisfy it.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage
from packaging.requirements import Requirement
from packaging.version import Version

from deerflow.convert.digest import EMPTY_MESSAGES_SHA256, canonical_messages, messages_sha256
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.savers import open_checkpointer
from tests.backends import BACKENDS
from tests.deerflow.support import config_for

ROOT = Path(__file__).resolve().parents[3]


def _flagged(thread: dict, backend: str, reason: str) -> list[dict]:
    return [
        cp for cp in thread["backends"][backend]["checkpoints"]
        if cp.get("deerflow_lock_reader", {}).get("reason") == reason
    ]


@pytest.mark.postgres
def test_postgres_delta_history_paging_old_checkpoints_of_long_threads_read_non_empty(postgres_fixture_db, manifest):
    """langgraph-checkpoint-postgres 3.1.1 read checkpoints >1024 older than the newest as empty."""
    thread = next(t for t in manifest["threads"] if t["thread_id"] == "delta-f100-150t")
    checkpoints = thread["backends"]["postgres"]["checkpoints"]
    flagged = _flagged(thread, "postgres", "postgres_delta_history_paging")
    assert len(flagged) == 174
    assert min(checkpoints.index(cp) for cp in flagged) >= 1024  # at least 1024 newer checkpoints
    with open_checkpointer(postgres_fixture_db) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
        for cp in flagged:
            assert cp["deerflow_lock_reader"]["message_count"] == 0  # what the lock reader saw
            messages = accessor.get(config_for("delta-f100-150t", cp["checkpoint_id"])).values["messages"]
            assert len(messages) == cp["message_count"] > 0
            assert messages_sha256(messages) == cp["messages_sha256"] != EMPTY_MESSAGES_SHA256


@pytest.mark.parametrize("backend", BACKENDS)
def test_subgraph_namespaces_read_non_empty(backend, request, manifest):
    """langgraph 1.2.9 replayed subgraph-namespace DeltaChannels with no saver -> empty messages."""
    database = request.getfixturevalue(f"{backend}_fixture_db")
    thread = next(t for t in manifest["threads"] if t["thread_id"] == "delta-f10-subgraph")
    subgraph = [cp for cp in thread["backends"][backend]["checkpoints"] if cp["checkpoint_ns"]]
    assert len(subgraph) == 10 and all(cp["checkpoint_ns"].startswith("research:") for cp in subgraph)
    assert len(_flagged(thread, backend, "subgraph_namespace_replay")) == 8
    with open_checkpointer(database) as saver:
        accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
        for cp in subgraph:
            messages = accessor.get(
                config_for(thread["thread_id"], cp["checkpoint_id"], cp["checkpoint_ns"])).values.get("messages", [])
            assert messages_sha256(messages) == cp["messages_sha256"]
            assert len(messages) == cp["message_count"]
            if "deerflow_lock_reader" in cp:
                assert cp["deerflow_lock_reader"]["message_count"] == 0 < len(messages)
        # and the namespace's history, as a dashboard lists it
        for ns in dict.fromkeys(cp["checkpoint_ns"] for cp in subgraph):
            history = accessor.history(config_for(thread["thread_id"], checkpoint_ns=ns))
            expected = [cp for cp in subgraph if cp["checkpoint_ns"] == ns]
            assert [s.config["configurable"]["checkpoint_id"] for s in history] == [
                cp["checkpoint_id"] for cp in expected]
            assert [messages_sha256(s.values.get("messages")) for s in history] == [
                cp["messages_sha256"] for cp in expected]


@pytest.mark.postgres
def test_fanout_replay_order_is_the_per_backend_manifest_order(sqlite_fixture_db, postgres_fixture_db, manifest):
    """Same-superstep writes: each backend's stored/replayed order is its own ground truth."""
    thread = next(t for t in manifest["threads"] if t["thread_id"] == "delta-f10-fanout")
    assert thread["backend_independent"]["materialization_identical_across_backends"] is False
    heads = {}
    for backend, database in (("sqlite", sqlite_fixture_db), ("postgres", postgres_fixture_db)):
        expected = thread["backends"][backend]
        with open_checkpointer(database) as saver:
            accessor = CheckpointStateAccessor.for_saver(saver, mode="delta")
            head = accessor.get(config_for(thread["thread_id"]))
            assert head.config["configurable"]["checkpoint_id"] == expected["head_checkpoint_id"]
            assert canonical_messages(head.values["messages"]) == expected["head"]["messages"]
            for snapshot, cp in zip(accessor.history(config_for(thread["thread_id"])), expected["checkpoints"],
                                    strict=True):
                assert messages_sha256(snapshot.values.get("messages")) == cp["messages_sha256"]
        heads[backend] = canonical_messages(head.values["messages"])
    assert heads["sqlite"] != heads["postgres"]
    assert sorted(map(repr, heads["sqlite"])) == sorted(map(repr, heads["postgres"]))  # same messages, other order
    # 3.1.3 replays in task_path (live) order: on Postgres the accessor equals every live run
    assert thread["backends"]["postgres"]["turns_where_live_state_differs_from_accessor"] == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_markerless_snapshot_checkpoints_give_full_mode_readers_a_list(backend, request, manifest):
    """langgraph 1.2.9 handed a full-mode reader the raw _DeltaSnapshot object."""
    database = request.getfixturevalue(f"{backend}_fixture_db")
    thread = next(t for t in manifest["threads"] if t["thread_id"] == "markerless-delta-f10-13t")
    flagged = _flagged(thread, backend, "full_mode_reader_unwraps_delta_snapshot")
    assert len(flagged) == 4
    with open_checkpointer(database) as saver:
        full = CheckpointStateAccessor.for_saver(saver, mode="full")
        for cp in flagged:
            assert cp["messages_stored"] == "delta_snapshot" and not cp["delta_marker"]
            assert cp["deerflow_lock_reader"]["full_mode_accessor"] == {"non_list_messages_value": "_DeltaSnapshot"}
            messages = full.get(config_for(thread["thread_id"], cp["checkpoint_id"])).values["messages"]
            assert type(messages) is list and all(isinstance(m, BaseMessage) for m in messages)
            assert {"message_count": len(messages),
                    "messages_sha256": messages_sha256(messages)} == cp["full_mode_accessor"]


# -- the releases ------------------------------------------------------------------

FIXES = {  # package -> the manifest's lock (buggy) and primary (fixed) reader versions
    "langgraph": ("1.2.9", "1.2.24"),
    "langgraph-checkpoint": ("4.1.1", "4.3.2"),
    "langgraph-checkpoint-postgres": ("3.1.1", "3.1.3"),
    "langgraph-checkpoint-sqlite": ("3.1.1", "3.1.2"),
}


def _requirements() -> dict[str, Requirement]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {Requirement(r).name.lower(): Requirement(r) for r in data["project"]["dependencies"]}


def test_pyproject_requires_the_fixing_releases(manifest):
    requirements = _requirements()
    versions = manifest["versions"]
    for package, (lock, fixed) in FIXES.items():
        assert versions["writer_and_lock_reader"][package] == lock
        assert versions["primary_reader"][package] == fixed
        spec = requirements[package].specifier
        assert not spec.contains(lock), f"{package} {spec} still admits the lock release {lock}"
        assert spec.contains(fixed), f"{package} {spec} excludes the primary reader {fixed}"
        # the minimum is exactly the fixing release, not something newer
        minimum = min(Version(s.version) for s in spec if s.operator == ">=")
        assert minimum == Version(fixed)


def test_installed_versions_satisfy_pyproject():
    for name, requirement in _requirements().items():
        installed = version(name)
        assert requirement.specifier.contains(installed, prereleases=True), (
            f"{name} {installed} not in {requirement.specifier}")
    for package, (lock, fixed) in FIXES.items():
        assert Version(version(package)) >= Version(fixed) > Version(lock)
