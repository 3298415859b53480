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
    # delta mode, issue 13 item 4: LangGraph's reading (the manifest's) is flagged, the replay rule's shown;
    # its digest where the manifest recorded the live run's state there, else None
    reader_disagreement: bool = False
    live_messages_sha256: str | None = None

    def describe(self) -> str:
        ns = f" ns={self.checkpoint_ns!r}" if self.checkpoint_ns else ""
        return f"{self.thread_id} @ {self.checkpoint_id}{ns} (expected {self.status}: {self.why})"


def fork_input_checkpoints(cps: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """``(ns, id)`` of the checkpoints the replay rule reads differently from LangGraph's reader (DeerFlow #4458).

    An ``input`` checkpoint whose parent has pending tasks (``next`` not empty, so writes are stored under
    it) consumed none of those writes, however many siblings it has; it and its descendants up to the next
    stored value read without them under the replay rule, LangGraph's reader replays them in (the
    manifest's values).
    """
    by_key = {(c["checkpoint_ns"], c["checkpoint_id"]): c for c in cps}
    children: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in cps:
        if c["parent_checkpoint_id"]:
            children.setdefault((c["checkpoint_ns"], c["parent_checkpoint_id"]), []).append(c)
    found: set[tuple[str, str]] = set()
    stack = [k for key, kids in children.items() if by_key[key]["next"]
             for k in kids if k["source"] == "input" and k["messages_stored"] == "absent"]
    while stack:
        cp = stack.pop()
        found.add((cp["checkpoint_ns"], cp["checkpoint_id"]))
        stack.extend(k for k in children.get((cp["checkpoint_ns"], cp["checkpoint_id"]), [])
                     if k["messages_stored"] == "absent")
    return found


def live_digests(t: dict[str, Any], backend: str) -> dict[str, str]:
    """The live run's messages digest at each turn's head checkpoint (manifest ``write_events``)."""
    return {e["head_checkpoint_id"]: e["live_messages_sha256"] for e in t["backends"][backend]["write_events"]
            if e.get("op") == "turn" and e.get("live_messages_sha256")}


def expected_answers(backend: str, mode: str) -> Iterator[Expected]:
    """Every (thread, checkpoint) of the manifest with its expected answer in ``mode``."""
    for t in threads():
        tid = t["thread_id"]
        cps = t["backends"][backend]["checkpoints"]
        by_key = {(c["checkpoint_ns"], c["checkpoint_id"]): c for c in cps}
        differ = fork_input_checkpoints(cps) if mode == "delta" else set()
        live = live_digests(t, backend) if differ else {}
        for cp in cps:
            common = {"thread_id": tid, "checkpoint_id": cp["checkpoint_id"], "checkpoint_ns": cp["checkpoint_ns"],
                      "next": tuple(sorted(cp["next"]))}
            if mode == "delta":
                flagged = (cp["checkpoint_ns"], cp["checkpoint_id"]) in differ
                yield Expected(**common, status=200, messages_sha256=cp["messages_sha256"],
                               message_count=cp["message_count"], why="delta-mode digest",
                               reader_disagreement=flagged,
                               live_messages_sha256=live.get(cp["checkpoint_id"]) if flagged else None)
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
