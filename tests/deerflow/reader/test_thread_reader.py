"""`deerflow.reader.ThreadReader` on the real fixture, both backends, without Django.

The manifest is the oracle: a delta-mode reader reads each head with the
manifest's digest; a full-mode reader reads full threads and the legacy
part of a migrated thread, and refuses (409) every checkpoint whose lineage
carries delta evidence; history pages carry the manifest's per-checkpoint
message counts; unknown addresses raise the 404 errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from deerflow.convert.digest import messages_sha256
from deerflow.errors import CheckpointModeMismatchError, CheckpointNotFoundError, ThreadNotFoundError
from deerflow.reader import ThreadReader
from deerflow.runtime.checkpoint_mode import INTERNAL_CHECKPOINT_MODE_KEY
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.savers import open_checkpointer
from tests import fixtures_real

MANIFEST = fixtures_real.manifest_threads()


@pytest.fixture
def readers(fixture_backend: tuple[str, Any]) -> Iterator[tuple[str, dict[str, ThreadReader]]]:
    """``(backend, {"delta": reader, "full": reader})`` over the read-only fixture."""
    backend, database = fixture_backend
    with open_checkpointer(database) as saver:
        yield backend, {mode: ThreadReader(saver, CheckpointStateAccessor.for_saver(saver, mode=mode), mode, 10)
                        for mode in ("delta", "full")}


@pytest.mark.parametrize("thread_id", ["full-tools-30t", "delta-f10-50t", "migrated-full20-delta20",
                                       "markerless-delta-f10-13t", "delta-f10-subgraph"])
def test_a_delta_mode_reader_reads_each_head_with_the_manifest_digest(readers, thread_id):
    backend, by_mode = readers
    head = MANIFEST[thread_id]["backends"][backend]["head"]
    view = by_mode["delta"].read_state(thread_id)
    assert view.checkpoint_id == head["checkpoint_id"]
    assert len(view.values["messages"]) == head["message_count"]
    assert messages_sha256(view.values["messages"]) == head["messages_sha256"]
    assert INTERNAL_CHECKPOINT_MODE_KEY not in view.metadata


def test_a_full_mode_reader_refuses_every_checkpoint_of_a_migrated_thread_after_the_seam(readers):
    backend, by_mode = readers
    thread_id = "migrated-full20-delta20"
    checkpoints = MANIFEST[thread_id]["backends"][backend]["checkpoints"]
    full_part = [c for c in checkpoints if not c["delta_marker"] and c["counters_since_delta_snapshot"] is None]
    delta_part = [c for c in checkpoints if c["delta_marker"]]
    assert full_part and delta_part
    for cp in full_part:  # the legacy part: no delta evidence on it or before it
        view = by_mode["full"].read_state(thread_id, cp["checkpoint_id"])
        assert messages_sha256(view.values["messages"]) == cp["messages_sha256"], cp["checkpoint_id"]
    for cp in delta_part:
        with pytest.raises(CheckpointModeMismatchError):
            by_mode["full"].read_state(thread_id, cp["checkpoint_id"])


def test_a_history_page_carries_the_manifest_counts_and_pages_on(readers):
    backend, by_mode = readers
    thread_id = "delta-f10-50t"
    expected = {c["checkpoint_id"]: c["message_count"] for c in MANIFEST[thread_id]["backends"][backend]["checkpoints"]}
    seen: list[str] = []
    before = None
    while True:
        rows, before = by_mode["delta"].read_history(thread_id, limit=50, before=before)
        for row in rows:
            assert row.message_count == expected[row.checkpoint_id], row.checkpoint_id
            assert row.problem is None and row.mode == "delta"
        seen += [row.checkpoint_id for row in rows]
        if before is None:
            break
    assert seen == list(expected)  # newest first, each checkpoint once, nothing left out
    with pytest.raises(CheckpointModeMismatchError):
        by_mode["full"].read_history(thread_id, limit=5)


def test_unknown_addresses_raise_the_not_found_errors(readers):
    _, by_mode = readers
    reader = by_mode["delta"]
    with pytest.raises(ThreadNotFoundError):
        reader.read_state("no-such-thread")
    with pytest.raises(ThreadNotFoundError):
        reader.namespaces("no-such-thread")
    with pytest.raises(CheckpointNotFoundError):
        reader.read_state("full-tools-30t", "1f000000-0000-6000-8000-000000000000")
    with pytest.raises(CheckpointNotFoundError):
        reader.read_history("full-tools-30t", before="1f000000-0000-6000-8000-000000000000")
    assert reader.thread_exists("full-tools-30t") and not reader.thread_exists("no-such-thread")


def test_namespaces_list_the_subgraph_namespaces_root_first(readers):
    backend, by_mode = readers
    counts = MANIFEST["delta-f10-subgraph"]["backends"][backend]["namespace_checkpoint_counts"]
    found = by_mode["delta"].namespaces("delta-f10-subgraph")
    assert found[0].checkpoint_ns == ""
    assert {ns.checkpoint_ns: ns.checkpoint_count for ns in found} == counts
