"""The manifest as an oracle for dashboard responses.

Expected answers are computed from the manifest's per-checkpoint facts, never
from hard-coded thread ids:

* delta mode: every checkpoint answers its ``messages_sha256``;
* full mode: a checkpoint whose lineage (itself and its ``parent_checkpoint_id``
  ancestors in the same namespace) shows delta evidence (``delta_marker`` or
  ``counters_since_delta_snapshot``) is refused with 409 (issue 3, item 6);
  so is a checkpoint where DeerFlow's locked reader hands out a raw
  ``_DeltaSnapshot``; otherwise the answer is the manifest's
  ``full_mode_accessor`` (a digest, or 409).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from deerflow.errors import MISMATCH_MESSAGE
from tests import fixtures_real

BACKENDS = ("postgres", "sqlite")
RAISES = "raises CheckpointModeMismatchError"
EMPTY_SHA256 = hashlib.sha256(b"[]").hexdigest()


def mismatch_detail(thread_id: str) -> str:
    """The exact 409 detail of the spec's HTTP table."""
    return f"Thread {thread_id}: {MISMATCH_MESSAGE}"


def threads() -> list[dict[str, Any]]:
    """Every manifest thread, in manifest order."""
    return fixtures_real.load_manifest()["threads"]


def thread(thread_id: str) -> dict[str, Any]:
    """One manifest thread."""
    return fixtures_real.manifest_threads()[thread_id]


def checkpoints(thread_id: str, backend: str) -> list[dict[str, Any]]:
    """The manifest's checkpoints of a thread on ``backend`` (root namespace first, newest first)."""
    return thread(thread_id)["backends"][backend]["checkpoints"]


def canonical_from_json(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixture README's canonical message form, built from API ``model_dump()`` dicts."""
    return [
        {
            "type": m["type"],
            "id": m.get("id"),
            "name": m.get("name"),
            "content": m["content"],
            "tool_call_id": m.get("tool_call_id"),
            "tool_calls": [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in (m.get("tool_calls") or [])],
        }
        for m in messages
    ]


def digest_from_json(messages: list[dict[str, Any]] | None) -> str:
    """SHA-256 of the canonical form of API message dicts (the manifest's ``messages_sha256``)."""
    text = json.dumps(canonical_from_json(messages or []), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _has_delta_evidence(cp: dict[str, Any]) -> bool:
    return bool(cp["delta_marker"]) or bool(cp["counters_since_delta_snapshot"])


def lineage_has_delta(cp: dict[str, Any], by_key: dict[tuple[str, str], dict[str, Any]]) -> bool:
    """True when ``cp`` or a same-namespace ancestor carries delta evidence."""
    seen: set[str] = set()
    node: dict[str, Any] | None = cp
    while node is not None and node["checkpoint_id"] not in seen:
        seen.add(node["checkpoint_id"])
        if _has_delta_evidence(node):
            return True
        parent = node["parent_checkpoint_id"]
        node = by_key.get((node["checkpoint_ns"], parent)) if parent else None
    return False


def lock_reader_hands_out_raw_snapshot(cp: dict[str, Any]) -> bool:
    """DeerFlow's locked reader returns a raw ``_DeltaSnapshot`` as ``messages`` here."""
    lock = cp.get("deerflow_lock_reader") or {}
    accessor = lock.get("full_mode_accessor")
    return isinstance(accessor, dict) and "non_list_messages_value" in accessor


@dataclass(frozen=True)
class Expected:
    """What ``/api/threads/<id>/state`` must answer for one checkpoint in one mode."""

    thread_id: str
    checkpoint_id: str
    checkpoint_ns: str
    status: int
    messages_sha256: str | None
    message_count: int | None
    why: str
    next: tuple[str, ...] = ()

    def describe(self) -> str:
        ns = f" ns={self.checkpoint_ns!r}" if self.checkpoint_ns else ""
        return f"{self.thread_id} @ {self.checkpoint_id}{ns} (expected {self.status}: {self.why})"


def expected_answers(backend: str, mode: str) -> Iterator[Expected]:
    """Every (thread, checkpoint) of the manifest with its expected answer in ``mode``."""
    for t in threads():
        tid = t["thread_id"]
        cps = t["backends"][backend]["checkpoints"]
        by_key = {(c["checkpoint_ns"], c["checkpoint_id"]): c for c in cps}
        for cp in cps:
            common = {"thread_id": tid, "checkpoint_id": cp["checkpoint_id"], "checkpoint_ns": cp["checkpoint_ns"],
                      "next": tuple(sorted(cp["next"]))}
            if mode == "delta":
                yield Expected(**common, status=200, messages_sha256=cp["messages_sha256"],
                               message_count=cp["message_count"], why="delta-mode digest")
                continue
            if lineage_has_delta(cp, by_key):
                yield Expected(**common, status=409, messages_sha256=None, message_count=None,
                               why="lineage has delta evidence")
            elif lock_reader_hands_out_raw_snapshot(cp):
                yield Expected(**common, status=409, messages_sha256=None, message_count=None,
                               why="locked reader hands out a raw _DeltaSnapshot")
            elif cp["full_mode_accessor"] == RAISES:
                yield Expected(**common, status=409, messages_sha256=None, message_count=None,
                               why="full-mode accessor raises")
            else:
                fm = cp["full_mode_accessor"]
                yield Expected(**common, status=200, messages_sha256=fm["messages_sha256"],
                               message_count=fm["message_count"], why="full_mode_accessor digest")


def root_checkpoints(thread_id: str, backend: str) -> list[dict[str, Any]]:
    """The manifest's root-namespace checkpoints of a thread, newest first."""
    return [c for c in checkpoints(thread_id, backend) if c["checkpoint_ns"] == ""]


def expected_mode(thread_id: str) -> tuple[str, str | None]:
    """``(mode, mode_evidence)`` from the manifest's marker summary."""
    summary = thread(thread_id)["backend_independent"]["marker_summary"]
    if summary["with_delta_marker"]:
        return "delta", "deerflow_marker"
    if summary["with_counters_since_delta_snapshot"]:
        return "delta", "langgraph_counters"
    return "full", None


def delta_thread_ids() -> list[str]:
    """Threads whose metadata shows delta evidence."""
    return [t["thread_id"] for t in threads() if expected_mode(t["thread_id"])[0] == "delta"]


def full_thread_ids() -> list[str]:
    """Threads without any delta evidence."""
    return [t["thread_id"] for t in threads() if expected_mode(t["thread_id"])[0] == "full"]
