"""``deerflow.convert.encoding`` and ``deerflow.convert.reading``: the shortcuts that make conversion
near the write floor must give exactly the saver's own bytes and values, on the real fixture's messages."""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert.encoding import MessageEncoder, RecordingSerializer, SharingDecoder, _as_ext
from deerflow.convert.reading import iter_checkpoints
from tests import fixtures_real


@pytest.fixture(scope="module")
def fixture_saver(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = fixtures_real.restore_sqlite(tmp_path_factory.mktemp("encoding"))
    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    yield saver
    conn.close()


def _message_lists(saver: Any) -> list[list[Any]]:
    """Every stored messages value (plain list or snapshot) and every messages write of the fixture."""
    out: list[list[Any]] = []
    for tup in saver.list(None):
        stored = tup.checkpoint["channel_values"].get("messages")
        if isinstance(stored, _DeltaSnapshot):
            stored = stored.value
        if isinstance(stored, list):
            out.append(stored)
        out += [w[2] for w in tup.pending_writes or [] if w[1] == "messages" and isinstance(w[2], list)]
    return out


def test_encoded_lists_serialize_to_the_savers_own_bytes(fixture_saver):
    serde = fixture_saver.serde
    encoder = MessageEncoder(serde)
    lists = _message_lists(fixture_saver)
    assert sum(len(m) for m in lists) > 1000  # the whole fixture, hostile payloads included
    assert any("<script" in str(m.content) for lst in lists for m in lst)
    for messages in lists:
        encoded = encoder.encode(messages)
        assert all(isinstance(e, ormsgpack.Ext) for e in encoded)
        assert serde.dumps_typed(encoded) == serde.dumps_typed(messages)
        # Inside a checkpoint, as SqliteSaver.put serializes it.
        checkpoint = {"v": 4, "id": "c", "channel_values": {"messages": messages, "title": "t"},
                      "channel_versions": {"messages": "00000000000000000000000000000002.1"}}
        assert serde.dumps_typed({**checkpoint, "channel_values": {"messages": encoded, "title": "t"}}) == \
            serde.dumps_typed(checkpoint)


def test_encoder_reuses_the_previous_list_and_keeps_what_it_cannot_encode():
    serde = JsonPlusSerializer()
    encoder = MessageEncoder(serde)
    h, a = HumanMessage("q", id="h"), AIMessage("a" * 70_000, id="a")
    first = encoder.encode([h])
    second = encoder.encode([h, a])
    assert second[0] is first[0]
    branch = encoder.encode([a])  # not an extension: encoded afresh, same cached items
    assert branch[0] is second[1]
    mixed = [h, {"role": "user", "content": "a dict is no single ext item"}]
    encoded = encoder.encode(mixed)
    assert encoded[1] is mixed[1]
    assert serde.dumps_typed(encoded) == serde.dumps_typed(mixed)


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 3, 255, 256, 65_535, 65_536])
def test_as_ext_reads_every_msgpack_ext_format(size):
    ext = ormsgpack.Ext(5, bytes(range(256)) * (size // 256) + bytes(size % 256))
    packed = ormsgpack.packb(ext)
    assert ormsgpack.packb(_as_ext(packed)) == packed


@pytest.mark.parametrize("item", [b"", b"\x91", ormsgpack.packb([1]), ormsgpack.packb("text"),
                                  ormsgpack.packb(ormsgpack.Ext(5, b"abc"))[:-1]])
def test_as_ext_rejects_anything_but_one_whole_ext_item(item):
    assert _as_ext(item) is None


def test_sharing_decoder_gives_the_savers_values_with_one_object_per_message():
    serde = JsonPlusSerializer()
    h, a, t = HumanMessage("q", id="h"), AIMessage("a", id="a"), ToolMessage("r", tool_call_id="c", id="t")
    snapshot = serde.dumps_typed(_DeltaSnapshot([h, a]))
    longer = serde.dumps_typed(_DeltaSnapshot([h, a, t]))
    write = serde.dumps_typed([t])
    decoder = SharingDecoder(serde)
    one, two, three = decoder.loads_typed(snapshot), decoder.loads_typed(longer), decoder.loads_typed(write)
    assert isinstance(one, _DeltaSnapshot) and one == serde.loads_typed(snapshot)
    assert two == serde.loads_typed(longer) and three == serde.loads_typed(write)
    assert one.value[0] is two.value[0] and one.value[1] is two.value[1] and two.value[2] is three[0]
    assert decoder.loads_typed(("null", b"")) is None
    assert decoder.dumps_typed([h]) == serde.dumps_typed([h])


def test_sharing_decoder_falls_back_to_a_serializer_without_jsonplus_hooks():
    class Plain:
        def loads_typed(self, data):
            return ("plain", data)

        def dumps_typed(self, obj):
            return ("plain", repr(obj).encode())

    decoder = SharingDecoder(Plain())
    assert decoder.loads_typed(("msgpack", b"\x90")) == ("plain", ("msgpack", b"\x90"))


def test_recording_serializer_remembers_the_last_output():
    serde = JsonPlusSerializer()
    recording = RecordingSerializer(serde)
    assert recording.last is None
    type_, data = recording.dumps_typed([HumanMessage("q", id="h")])
    assert (type_, data) == serde.dumps_typed([HumanMessage("q", id="h")])
    assert recording.last == (hashlib.sha256(data).hexdigest(), len(data))
    assert recording.loads_typed((type_, data)) == [HumanMessage("q", id="h")]


@pytest.mark.parametrize("page_size", [1, 2, 7, 32])
def test_paged_reading_returns_exactly_what_saver_list_returns(fixture_saver, page_size):
    threads = {t.config["configurable"]["thread_id"] for t in fixture_saver.list(None)}
    assert len(threads) >= 20
    for thread_id in sorted(threads)[:6]:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        expected = list(fixture_saver.list(config))
        got = list(iter_checkpoints(fixture_saver, thread_id, "", page_size=page_size))
        assert [t.config for t in got] == [t.config for t in expected]
        assert [t.checkpoint for t in got] == [t.checkpoint for t in expected]
        assert [t.pending_writes for t in got] == [t.pending_writes for t in expected]


def test_paged_reading_rejects_a_page_size_below_one(fixture_saver):
    with pytest.raises(ValueError, match="page_size must be at least 1, got 0"):
        next(iter_checkpoints(fixture_saver, "any", "", page_size=0))


