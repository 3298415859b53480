"""Rebase: store a kept delta checkpoint's materialized value as a ``_DeltaSnapshot`` before its ancestors go.

LangGraph reads a delta channel absent from ``channel_values`` by walking
the parent chain to the nearest ``_DeltaSnapshot`` and replaying the writes
stored under the checkpoints in between. A checkpoint that loses its parent
must therefore hold its own seed: LangGraph's own snapshot form,
``channel_values["messages"] = _DeltaSnapshot(value)``, written with the
saver's ``put`` (so the saver's serializer encodes it: inline in SQLite's
checkpoint blob, a blob row plus the inline ``true`` marker on Postgres, a
blob entry in memory). Its children keep reading through it unchanged (they
replay the writes stored under it, which are kept).

Postgres and memory keep one blob per ``(namespace, channel, version)``:
every kept checkpoint that has this ``messages`` version must read the same
value as the snapshot stored under it, else the rebased checkpoint gets its
own version ``<version>~dfa<n>`` (sorting right after the original, as the
converter's split versions do).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.convert.onepass import stored_seed

if TYPE_CHECKING:
    from langgraph.checkpoint.base import CheckpointTuple

__all__ = ["RebasePlan", "needs_rebase", "rebase"]

_Key = tuple[str, str]


def needs_rebase(tup: CheckpointTuple, value: list[Any] | None) -> bool:
    """True when ``tup`` stores no seed for ``messages`` but has a ``messages`` version (its value lives upstream)."""
    stored = tup.checkpoint["channel_values"].get("messages")
    return not stored_seed(stored)[0] and "messages" in (tup.checkpoint.get("channel_versions") or {})


class RebasePlan:
    """The ``messages`` version each rebased checkpoint stores its snapshot under.

    Args:
        shared_versions: the store keeps one blob per ``(namespace, channel, version)`` (Postgres,
            memory: the store's ``shared_versions``); false when values are inline (SQLite: versions never change).
        kept: ``{key: (messages version or None, our digest)}`` for every kept checkpoint.
        blob_keys: ``{(ns, channel, version)}`` of blobs stored now.
    """

    def __init__(self, shared_versions: bool, kept: Mapping[_Key, tuple[Any, str | None]],
                 blob_keys: Iterable[tuple[str, str, str]]):
        self.shared_versions = shared_versions
        self._digests: dict[tuple[str, str], set[str | None]] = {}
        for (ns, _cid), (version, digest) in kept.items():
            if version is not None:
                self._digests.setdefault((ns, str(version)), set()).add(digest)
        self._taken = {(ns, str(v)) for ns, ch, v in blob_keys if ch == "messages"}

    def version_for(self, ns: str, version: Any, digest: str | None) -> Any:
        """The version to store ``digest``'s snapshot under (``version`` itself when no kept reader disagrees)."""
        if not self.shared_versions:
            return version
        if self._digests.get((ns, str(version)), {digest}) == {digest}:
            return version
        n = 1
        while (ns, f"{version}~dfa{n}") in self._taken or (ns, f"{version}~dfa{n}") in self._digests:
            n += 1
        candidate = f"{version}~dfa{n}"
        self._digests[(ns, candidate)] = {digest}
        return candidate


def rebase(store: Any, thread_id: str, key: _Key, tup: CheckpointTuple, value: list[Any], version: Any) -> None:
    """Re-``put`` one checkpoint with ``_DeltaSnapshot(value)`` as its stored ``messages``, parent link cleared.

    The checkpoint keeps its id, metadata (the stored column is put back
    unchanged after the ``put``), every other channel and its writes rows.

    Args:
        store: a :class:`~deerflow.retention.store.SqlStore` or ``MemoryStore``.
        thread_id, key: the checkpoint ``(checkpoint_ns, checkpoint_id)``.
        tup: its ``CheckpointTuple`` as the saver returned it.
        value: its materialized message list.
        version: the ``messages`` version to store the snapshot under (:meth:`RebasePlan.version_for`).
    """
    ns, _cid = key
    metadata = store.raw_metadata(thread_id, key)
    checkpoint: dict[str, Any] = dict(tup.checkpoint)
    checkpoint["channel_values"] = {**checkpoint["channel_values"], "messages": _DeltaSnapshot(list(value))}
    checkpoint["channel_versions"] = {**checkpoint["channel_versions"], "messages": version}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    store.saver.put(config, checkpoint, dict(tup.metadata), {"messages": version})
    store.finish_rebase(thread_id, key, metadata)
