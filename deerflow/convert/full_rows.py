"""Delta->full conversion: what one rewritten checkpoint row holds.

Which checkpoints a conversion rewrites (:func:`needs_rewrite`), the
``messages`` version each is stored under (:class:`VersionPlan`) and the
``(config, checkpoint, metadata, new_versions)`` it is re-``put`` with
(:func:`rewritten`): the full list, the DeerFlow marker and LangGraph's
``messages`` counter removed; every other channel, parent link and id untouched.
Shared by the writer (:mod:`deerflow.convert.full_writer`) and the dry run's
estimate (:mod:`deerflow.convert.full_estimate`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from deerflow.convert.encoding import MessageEncoder
from deerflow.convert.report import Abort
from deerflow.convert.walk import Entry
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    COUNTERS_METADATA_KEY,
    checkpoint_metadata_uses_delta,
)
from deerflow.runtime.delta_evidence import DELTA_WRITES_VERSIONED_METADATA_KEY
from deerflow.storage.addressing import config_for
from deerflow.storage.dialect import Dialect

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

__all__ = ["VersionPlan", "needs_rewrite", "rewrites_version", "rewritten"]


def _clean_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    out = dict(metadata)
    out.pop(CHECKPOINT_MODE_METADATA_KEY, None)
    counters = out.get(COUNTERS_METADATA_KEY)
    if isinstance(counters, dict):
        counters = {k: v for k, v in counters.items() if k != "messages"}
        if counters:
            out[COUNTERS_METADATA_KEY] = counters
        else:
            out.pop(COUNTERS_METADATA_KEY)
    if not out.get(COUNTERS_METADATA_KEY):  # no other delta channel left: LangGraph.js's key goes with messages'
        out.pop(DELTA_WRITES_VERSIONED_METADATA_KEY, None)
    return out


def _plain(tup: CheckpointTuple) -> bool:
    return isinstance(tup.checkpoint["channel_values"].get("messages"), list)


def _has_version(tup: CheckpointTuple) -> bool:
    return "messages" in (tup.checkpoint.get("channel_versions") or {})


def needs_rewrite(tup: CheckpointTuple, value: list[Any]) -> bool:
    return checkpoint_metadata_uses_delta(tup.metadata) or (not _plain(tup) and (bool(value) or _has_version(tup)))


def rewrites_version(tup: CheckpointTuple) -> bool:
    """True when a conversion re-``put``s this checkpoint with a ``messages`` version, whatever its value."""
    return _has_version(tup) and (checkpoint_metadata_uses_delta(tup.metadata) or not _plain(tup))


class VersionPlan:
    """The ``messages`` version each rewritten checkpoint stores its value under, decided in walk order.

    SQLite stores values inline, so every checkpoint keeps its version.
    Postgres keeps one blob per ``(namespace, version)``: checkpoints normally
    share a version only when they share a value, but below a branch point
    LangGraph's reader applies sibling writes, so two checkpoints can share a
    version yet read differently; the later one (in walk order) then gets its
    own version ``<version>~dfa<n>``, which sorts right after the original and
    before every later version (StateGraph nodes trigger on their own
    ``branch:to:*`` channels, so ``next`` is unchanged).

    Args:
        dialect: a :class:`~deerflow.storage.dialect.Dialect` or its value (versions split only with a blob table).
    """

    def __init__(self, dialect: str):
        self.dialect = Dialect(dialect)
        self._digest: dict[tuple[str, str], str | None] = {}

    def target(self, e: Entry) -> Any:
        """The version ``e`` is rewritten under (``None`` when it has no ``messages`` version)."""
        versions = e.tup.checkpoint.get("channel_versions") or {}
        if "messages" not in versions:
            return None
        version = versions["messages"]
        if not self.dialect.has_blob_table:
            return version
        candidate, n = str(version), 0
        while self._digest.setdefault((e.ns, candidate), e.digest) != e.digest:
            n += 1
            candidate = f"{version}~dfa{n}"
        return candidate


def rewritten(thread_id: str, e: Entry, target_version: Any,
               encoder: MessageEncoder) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]:
    """``(config, checkpoint, metadata, new_versions)`` to ``put`` for one rewritten checkpoint.

    ``channel_values["messages"]`` is the value encoded by ``encoder`` (the
    same bytes once serialized); ``new_versions`` names ``messages`` when the
    checkpoint has a version.

    Raises:
        Abort: ``blocked`` when the checkpoint has messages but no ``messages`` channel version.
    """
    tup = e.tup
    checkpoint = tup.checkpoint.copy()
    checkpoint["channel_values"] = dict(checkpoint["channel_values"])
    versions = checkpoint.get("channel_versions") or {}
    new_versions: ChannelVersions = {}
    if "messages" in versions:
        checkpoint["channel_values"]["messages"] = encoder.encode(e.value or [])
        if target_version != versions["messages"]:
            checkpoint["channel_versions"] = {**versions, "messages": target_version}
        new_versions["messages"] = target_version
    elif e.value:
        raise Abort("blocked", f"checkpoint {checkpoint['id']} has messages but no channel version",
                     "Leave this thread in delta mode and report the thread shape.")
    else:
        checkpoint["channel_values"].pop("messages", None)
    parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
    # LangGraph's metadata is open (DeerFlow's marker and LangGraph's counters are keys its TypedDict does not name)
    metadata = cast("CheckpointMetadata", _clean_metadata(dict(tup.metadata)))
    return config_for(thread_id, e.ns, parent), checkpoint, metadata, new_versions
