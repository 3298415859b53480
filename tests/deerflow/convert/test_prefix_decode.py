"""PrefixDecoder: a stored list whose bytes are a prefix of (or extend) one decoded before is sliced (or only its
tail decoded) and gives exactly what a full decode gives; anything else is decoded in full."""

from __future__ import annotations

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert.encoding import SharingDecoder
from deerflow.convert.shared_prefix import PrefixDecoder

SERDE = JsonPlusSerializer()


def _messages(n: int) -> list[object]:
    return [(HumanMessage if i % 2 == 0 else AIMessage)(f"message {i} " + "x" * (i * 7 % 300), id=f"m-{i}")
            for i in range(n)]


def _raw(messages: list[object]) -> bytes:
    type_, raw = SERDE.dumps_typed(messages)
    assert type_ == "msgpack"
    return raw


def _decoder() -> SharingDecoder:
    return SharingDecoder(JsonPlusSerializer())


def _loads(decoder: SharingDecoder, raw: bytes) -> object:
    return decoder.loads_typed(("msgpack", raw))


@pytest.mark.parametrize("length", [20, 300])  # fixarray and array16 headers (and ext8/ext16 items)
def test_older_prefixes_are_sliced_from_the_newest_list(length):
    full = _messages(length)
    decoder = _decoder()
    head = _loads(decoder, _raw(full))
    assert head == full
    for n in (length - 1, length // 2, 16, 15, 1, 0):
        got = _loads(decoder, _raw(full[:n]))
        assert got == full[:n] == SERDE.loads_typed(("msgpack", _raw(full[:n])))
        assert all(a is b for a, b in zip(got, head, strict=False))  # the same objects, not decoded again
    assert decoder.prefixes.counts == {"full": 1, "prefix": 6, "tail": 0}


def test_a_longer_list_decodes_only_its_tail_and_becomes_the_base():
    full = _messages(40)
    decoder = _decoder()
    parent = _loads(decoder, _raw(full[:10]))
    child = _loads(decoder, _raw(full[:25]))
    grandchild = _loads(decoder, _raw(full))
    assert child == full[:25] and grandchild == full
    assert child[:10] == parent and all(a is b for a, b in zip(child, parent, strict=False))
    assert _loads(decoder, _raw(full[:33])) == full[:33]  # a prefix of the extended base
    assert decoder.prefixes.counts == {"full": 1, "prefix": 1, "tail": 2}


def test_an_edited_mid_chain_message_is_decoded_in_full():
    """The list of a checkpoint whose middle message was edited (same id, other content) shares the bytes up to
    the edit only: it is decoded in full, never sliced from the list decoded before."""
    full = _messages(30)
    edited = list(full)
    edited[12] = HumanMessage("edited", id=full[12].id)
    decoder = _decoder()
    assert _loads(decoder, _raw(edited)) == edited
    got = _loads(decoder, _raw(full[:20]))
    assert got == full[:20] and got[12].content == full[12].content != "edited"
    longer = _loads(decoder, _raw(edited + _messages(33)[30:]))  # extends `edited`, not the last full decode
    assert longer[12].content == "edited" and len(longer) == 33
    assert decoder.prefixes.counts == {"full": 2, "prefix": 0, "tail": 1}


def test_same_length_but_other_bytes_is_decoded_in_full():
    full = _messages(8)
    other = [*full[:7], AIMessage("other", id="m-7")]
    decoder = _decoder()
    _loads(decoder, _raw(full))
    assert _loads(decoder, _raw(other)) == other
    assert decoder.prefixes.counts["full"] == 2


def test_pending_writes_between_stored_lists_keep_the_base():
    """A checkpoint's pending writes (small message lists) are read between two stored lists."""
    full = _messages(50)
    decoder = _decoder()
    for n in range(50, 40, -1):
        assert _loads(decoder, _raw(full[:n])) == full[:n]
        assert _loads(decoder, _raw([AIMessage(f"write {n}", id=f"w-{n}")]))[0].id == f"w-{n}"
    assert decoder.prefixes.counts["prefix"] == 9


def test_values_that_are_not_lists_of_ext_items_decode_as_usual():
    decoder = PrefixDecoder(ormsgpack.unpackb)
    plain = ormsgpack.packb([{"a": 1}, "b", 3])
    assert decoder.loads(plain) == [{"a": 1}, "b", 3]
    assert decoder.loads(ormsgpack.packb([{"a": 1}])) == [{"a": 1}]
    assert decoder.loads(ormsgpack.packb({"k": [1, 2]})) == {"k": [1, 2]}
    assert decoder.loads(ormsgpack.packb("text")) == "text"
    assert decoder.counts == {"full": 2, "prefix": 0, "tail": 0}  # counts array values only


def test_trailing_or_missing_bytes_behave_as_a_full_decode():
    full = _messages(12)
    raw = _raw(full)
    decoder = _decoder()
    _loads(decoder, raw)
    # a prefix with one byte too many is no prefix: decoded in full, as the serializer would (it ignores the rest)
    padded = _raw(full[:5]) + b"\xc0"
    assert _loads(decoder, padded) == SERDE.loads_typed(("msgpack", padded)) == full[:5]
    truncated = raw[:-3]
    with pytest.raises(Exception):  # noqa: B017, PT011 - the serializer's own decoding error
        SERDE.loads_typed(("msgpack", truncated))
    with pytest.raises(Exception):  # noqa: B017, PT011
        _loads(decoder, truncated)


def _checkpoint(messages: object, **extra: object) -> dict:
    return {"v": 4, "ts": "2026-12-03T00:00:00+00:00", "id": "c", "channel_values": {
        "title": "t", **extra, "messages": messages, "summary_text": None},
        "channel_versions": {"messages": "00000003.0.5"}, "versions_seen": {"agent": {"messages": 2}},
        "updated_channels": ["messages"]}


def test_whole_checkpoints_share_their_messages_lists():
    """SQLite stores the whole checkpoint in one row: its messages list is sliced the same way, the rest decoded
    around it, and the result is what the serializer decodes, key order included."""
    full = _messages(40)
    decoder = _decoder()
    rows = [_raw_checkpoint(_checkpoint(full[:n], artifacts=[{"a": n}])) for n in (40, 39, 30, 2, 0)]
    for raw in rows:
        got, want = _loads(decoder, raw), SERDE.loads_typed(("msgpack", raw))
        assert got == want and list(got["channel_values"]) == list(want["channel_values"])
    assert decoder.prefixes.counts == {"full": 1, "prefix": 4, "tail": 0}
    edited = list(full[:30])
    edited[7] = HumanMessage("edited", id=full[7].id)
    got = _loads(decoder, _raw_checkpoint(_checkpoint(edited)))
    assert got["channel_values"]["messages"][7].content == "edited"
    assert decoder.prefixes.counts["full"] == 2


def test_checkpoints_without_a_messages_list_decode_as_usual():
    from deerflow._langgraph_compat import _DeltaSnapshot

    decoder = _decoder()
    for checkpoint in (_checkpoint(None), _checkpoint(_DeltaSnapshot(_messages(3))), _checkpoint("text"),
                       {"v": 4, "channel_values": {}}, {"id": "no values"}):
        raw = _raw_checkpoint(checkpoint)
        assert _loads(decoder, raw) == SERDE.loads_typed(("msgpack", raw))
    assert decoder.prefixes.counts["prefix"] == 0


def _raw_checkpoint(checkpoint: dict) -> bytes:
    type_, raw = SERDE.dumps_typed(checkpoint)
    assert type_ == "msgpack"
    return raw


def test_snapshots_are_sliced_from_each_other_not_from_the_writes_between_them():
    """A delta thread's ``_DeltaSnapshot`` s read newest first (writes read between them) share their items."""
    full = _messages(60)
    decoder = _decoder()

    def snapshot(n: int) -> bytes:
        return SERDE.dumps_typed(_DeltaSnapshot(full[:n]))[1]

    newest = _loads(decoder, snapshot(60))
    assert isinstance(newest, _DeltaSnapshot) and newest.value == full
    for n in (50, 40, 30):
        for k in range(6):  # pending writes (small lists of new messages) read between two snapshots
            assert _loads(decoder, _raw([full[n + k % 3]])) == [full[n + k % 3]]
        got = _loads(decoder, snapshot(n))
        want = SERDE.loads_typed(("msgpack", snapshot(n)))
        assert isinstance(got, _DeltaSnapshot) and got.value == want.value == full[:n]
        assert all(a is b for a, b in zip(got.value, newest.value, strict=False))  # sliced, not decoded again
    longer = _loads(decoder, SERDE.dumps_typed(_DeltaSnapshot(full + _messages(61)[60:]))[1])
    assert longer.value == full + _messages(61)[60:] and longer.value[0] is newest.value[0]  # only the tail decoded
    assert decoder.snapshots.counts == {"full": 1, "prefix": 3, "tail": 1}
    edited = full[:20] + [HumanMessage("edited", id="m-20")]
    assert _loads(decoder, SERDE.dumps_typed(_DeltaSnapshot(edited))[1]).value == edited  # different bytes: in full
