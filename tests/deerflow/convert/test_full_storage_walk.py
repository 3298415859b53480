"""The compactor's walk of a full-mode thread holds each stored list as a prefix of its child's (memory), and
hands on exactly what the plain walk hands on: the same checkpoints, values, digests and stored lists."""

from __future__ import annotations

from deerflow.convert.onepass import SharedPrefix
from deerflow.convert.report import ThreadReport
from deerflow.convert.walk import Walk
from deerflow.storage.sessions import open_session
from tests.deerflow.convert.support import checkpoint_ids, full_thread_with_fork


def _entries(db, thread_id: str, *, full_storage: bool):
    seen_before_walk: list[object] = []
    with open_session(db, write=False) as session:
        walk = Walk(session, thread_id, ThreadReport(thread_id=thread_id), lambda tup, value: True,
                    full_storage=full_storage)
        walk.on_namespace = lambda ns, tuples: seen_before_walk.extend(
            t.checkpoint["channel_values"].get("messages") for t in tuples.values())
        out = [(e.ns, e.checkpoint_id, e.digest, [m.id for m in e.value or []],
                [m.id for m in e.tup.checkpoint["channel_values"].get("messages") or []]) for e in walk]
    return out, seen_before_walk


def test_full_storage_walk_shares_prefixes_and_hands_on_the_same_entries(scratch_db):
    full_thread_with_fork(scratch_db, "t")
    plain, plain_seen = _entries(scratch_db, "t", full_storage=False)
    shared, shared_seen = _entries(scratch_db, "t", full_storage=True)
    assert shared == plain and len(plain) == len(checkpoint_ids(scratch_db, "t"))
    # the stored list handed on is the value itself (a full thread stores its value at every checkpoint)
    assert all(stored == value for _ns, _cid, _d, value, stored in shared if stored)
    prefixes = [v for v in shared_seen if isinstance(v, SharedPrefix)]
    assert not any(isinstance(v, SharedPrefix) for v in plain_seen)
    assert len(prefixes) == sum(isinstance(v, list) for v in plain_seen) > 10
    # the fork and the Overwrite start new chains; every other list is a prefix of a newer one
    bases = {id(p.base) for p in prefixes}
    assert 2 <= len(bases) <= 4
    assert all(p.resolve() == p.base[:len(p)] for p in prefixes)
