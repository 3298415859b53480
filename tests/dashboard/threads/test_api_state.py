"""``GET /api/threads/<id>/state``: shape, head, addressing, channels and JSON values."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import quote

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_METADATA_KEY, INTERNAL_CHECKPOINT_MODE_KEY
from tests.dashboard import oracle

pytestmark = pytest.mark.django_db

STATE_KEYS = {"thread_id", "checkpoint_id", "checkpoint_ns", "parent_checkpoint_id", "created_at",
              "metadata", "values", "next", "findings", "title", "owner", "deerflow_thread"}
MESSAGE_CLASSES = {"human": HumanMessage, "ai": AIMessage, "tool": ToolMessage, "system": SystemMessage}
SAMPLE_THREADS = ["full-title-artifacts-todos", "full-compaction", "delta-f10-remove-all", "delta-f10-fork",
                  "migrated-full20-delta20", "markerless-delta-f10-13t", "delta-f10-untrusted-content",
                  "full-untrusted-content", "full-empty", "delta-empty", "delta-f10-subgraph"]


def state_url(thread_id: str) -> str:
    return f"/api/threads/{quote(thread_id, safe='/')}/state"


def _channels_sha256(values: dict) -> str:
    channels = {k: v for k, v in values.items() if k != "messages"}
    text = json.dumps(channels, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("thread_id", SAMPLE_THREADS)
def test_head_state_matches_manifest_head(fixture_backend, runtime_for, staff_client, thread_id):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    response = staff_client.get(state_url(thread_id))
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == STATE_KEYS
    head = oracle.thread(thread_id)["backends"][backend]["head"]
    entry = next(c for c in oracle.root_checkpoints(thread_id, backend) if c["checkpoint_id"] == head["checkpoint_id"])
    assert body["thread_id"] == thread_id
    assert body["checkpoint_id"] == head["checkpoint_id"]
    assert body["checkpoint_ns"] == ""
    assert body["parent_checkpoint_id"] == entry["parent_checkpoint_id"]
    assert body["created_at"] == entry["ts"]
    assert body["next"] == sorted(head["next"])
    assert body["metadata"]["step"] == entry["step"]
    assert body["metadata"]["source"] == entry["source"]
    assert (body["metadata"].get(CHECKPOINT_MODE_METADATA_KEY) == "delta") == entry["delta_marker"]
    messages = body["values"].get("messages", [])
    assert len(messages) == head["message_count"]
    assert oracle.digest_from_json(messages) == head["messages_sha256"]
    assert _channels_sha256(body["values"]) == entry["channels_sha256"]
    assert body["values"].get("title") == entry["title"]


def test_other_channels_are_plain_json_values(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "full")
    body = staff_client.get(state_url("full-title-artifacts-todos")).json()
    expected = oracle.thread("full-title-artifacts-todos")["backend_independent"]["head_state"]["channels"]
    for name, value in expected.items():
        assert body["values"][name] == value, name
    assert body["values"]["title"] == "Renamed: <b>Report</b> & summary"


@pytest.mark.parametrize("thread_id", ["full-tools-30t", "delta-f10-50t", "delta-f10-untrusted-content"])
def test_messages_are_model_dump_dicts(sqlite_fixture_db, runtime_for, staff_client, thread_id):
    runtime_for(sqlite_fixture_db, "delta")
    messages = staff_client.get(state_url(thread_id)).json()["values"]["messages"]
    assert messages
    kinds = set()
    for item in messages:
        cls = MESSAGE_CLASSES[item["type"]]
        kinds.add(item["type"])
        assert set(item) == set(cls.model_fields), item["type"]
        assert cls(**item).model_dump() == item
    assert {"human", "ai"} <= kinds
    if thread_id != "delta-f10-untrusted-content":
        assert "tool" in kinds
        calls = [c for m in messages if m["type"] == "ai" for c in m["tool_calls"]]
        assert calls and all(set(c) >= {"name", "args", "id"} for c in calls)


def test_content_blocks_and_huge_payloads_survive(sqlite_fixture_db, runtime_for, staff_client):
    runtime_for(sqlite_fixture_db, "full")
    body = staff_client.get(state_url("full-untrusted-content")).json()
    expected = oracle.thread("full-untrusted-content")["backend_independent"]["head_state"]["messages"]
    got = oracle.canonical_from_json(body["values"]["messages"])
    assert got == expected
    assert any(isinstance(m["content"], list) for m in got)
    assert max(len(m["content"]) for m in got if isinstance(m["content"], str)) > 1_000_000


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_full_thread_checkpoints_read_identically_in_both_modes(sqlite_fixture_db, runtime_for, staff_client, mode):
    """Spec: a delta-mode process reads legacy full checkpoints transparently."""
    runtime_for(sqlite_fixture_db, mode)
    for cp in oracle.checkpoints("full-rollback", "sqlite"):
        body = staff_client.get(state_url("full-rollback"), {"checkpoint_id": cp["checkpoint_id"]}).json()
        assert oracle.digest_from_json(body["values"].get("messages")) == cp["messages_sha256"], cp["checkpoint_id"]
        assert body["parent_checkpoint_id"] == cp["parent_checkpoint_id"]
        assert body["next"] == sorted(cp["next"]), cp["checkpoint_id"]


def test_subgraph_namespace_state(fixture_backend, runtime_for, staff_client):
    backend, database = fixture_backend
    runtime_for(database, "delta")
    subgraph = [c for c in oracle.checkpoints("delta-f10-subgraph", backend) if c["checkpoint_ns"]]
    namespaces = list(dict.fromkeys(c["checkpoint_ns"] for c in subgraph))
    assert len(namespaces) == 2 and all(ns.startswith("research:") for ns in namespaces)
    for ns in namespaces:
        newest = next(c for c in subgraph if c["checkpoint_ns"] == ns)
        body = staff_client.get(state_url("delta-f10-subgraph"), {"checkpoint_ns": ns}).json()
        assert body["checkpoint_ns"] == ns
        assert body["checkpoint_id"] == newest["checkpoint_id"], "namespace head"
        assert oracle.digest_from_json(body["values"].get("messages")) == newest["messages_sha256"]
    # A subgraph checkpoint id is not a root-namespace checkpoint.
    response = staff_client.get(state_url("delta-f10-subgraph"), {"checkpoint_id": subgraph[0]["checkpoint_id"]})
    assert response.status_code == 404


def test_empty_thread_state(fixture_backend, runtime_for, staff_client):
    _backend, database = fixture_backend
    runtime_for(database, "full")
    for thread_id in ("full-empty", "delta-empty"):
        body = staff_client.get(state_url(thread_id)).json()
        assert body["values"].get("messages", []) == []
        assert body["parent_checkpoint_id"] is None
        assert body["metadata"]["step"] == -1


@pytest.mark.parametrize("mode", ["full", "delta"])
@pytest.mark.parametrize("thread_id", ["full-compaction", "delta-f10-compaction", "migrated-full20-delta20",
                                       "markerless-delta-f10-13t", "delta-f10-subgraph"])
def test_internal_mode_key_never_reaches_the_wire(sqlite_fixture_db, runtime_for, staff_client, mode, thread_id):
    """Spec, "Marker contract": ``__deerflow_checkpoint_channel_mode`` never reaches the wire."""
    runtime_for(sqlite_fixture_db, mode)
    cps = oracle.checkpoints(thread_id, "sqlite")
    sample = [cps[0], cps[len(cps) // 2], cps[-1]]
    bodies = [
        staff_client.get(state_url(thread_id)),
        staff_client.get(f"/api/threads/{thread_id}/history", {"limit": 500}),
        staff_client.get("/api/threads", {"limit": 1000}),
    ] + [
        staff_client.get(state_url(thread_id),
                         {"checkpoint_id": c["checkpoint_id"], "checkpoint_ns": c["checkpoint_ns"]})
        for c in sample
    ]
    statuses = set()
    for response in bodies:
        statuses.add(response.status_code)
        assert INTERNAL_CHECKPOINT_MODE_KEY not in response.content.decode("utf-8")
    assert statuses <= {200, 409}


def test_caller_supplied_internal_key_is_ignored(sqlite_fixture_db, runtime_for, staff_client):
    """The key is not a query parameter: a caller cannot steer the process mode."""
    runtime_for(sqlite_fixture_db, "full")
    response = staff_client.get(state_url("delta-f10-1t"), {INTERNAL_CHECKPOINT_MODE_KEY: "delta"})
    assert response.status_code == 409
    assert response.json()["detail"] == oracle.mismatch_detail("delta-f10-1t")


@pytest.mark.parametrize("query", [{"checkpoint_id": "x" * 201}, {"checkpoint_ns": "n" * 2001},
                                   {"checkpoint_id": "bad\x00id"}])
def test_bad_state_parameters_answer_400(sqlite_fixture_db, runtime_for, staff_client, query):
    runtime_for(sqlite_fixture_db, "delta")
    response = staff_client.get(state_url("delta-f10-1t"), query)
    assert response.status_code == 400
    assert set(response.json()) >= {"detail", "hint"}
