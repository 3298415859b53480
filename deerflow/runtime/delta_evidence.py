"""A checkpoint's delta evidence: one definition, read in Python and generated as SQL.

DeerFlow decides a checkpoint's mode from its metadata alone (spec, "Marker
contract"; DeerFlow's ``checkpoint_metadata_uses_delta``). The evidence is a
disjunction of clauses, each a path into the metadata and an expected value::

    marker     metadata["deerflow_checkpoint_channel_mode"] == "delta"
    counters   "messages" in metadata["counters_since_delta_snapshot"]   (a mapping; any value, null too)
    versioned  "delta_writes_versioned" in metadata                      (any value)

    shows_delta(metadata) == marker(metadata) or counters(metadata) or versioned(metadata)

Only ``"delta"`` is a marker: DeerFlow writes no other value and a full-mode
process removes the key, so a marker with another value (``"full"``, ``""``,
a number) is no evidence. Other channels' counters are no evidence either (a
full-mode process reads their threads' ``messages`` as stored). LangGraph.js
inlines no counters but marks every checkpoint of a thread its ``DeltaChannel``
graphs started with ``delta_writes_versioned``; LangGraph's own ``prune``
(checkpoint-postgres, ``PRUNE_DELTA_THREADS_SQL``) takes the key's presence as
delta evidence, and so does this definition: the gates fail closed on such a
thread (its ``messages`` is no list a full-mode process could read) and the
census and the rewrites treat it as the delta thread it is. The ``versioned``
clause is reported as LangGraph's bookkeeping, like the counters.

The law this module keeps: for every stored checkpoint row ``c`` of either
dialect, ``shows_delta(metadata(c))`` equals the value of
:meth:`deerflow.storage.Dialect.delta_evidence` on ``c``, because both are
read off :data:`DELTA_EVIDENCE` (:meth:`Clause.holds` in Python; the dialect
turns each clause into SQL with two JSON primitives). A test checks them on
every checkpoint of the real fixture and on crafted metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = [
    "BOOKKEEPING",
    "CHECKPOINT_MODE_METADATA_KEY",
    "COUNTERS",
    "ANY_COUNTERS",
    "COUNTERS_METADATA_KEY",
    "DELTA_EVIDENCE",
    "DELTA_WRITES_VERSIONED_METADATA_KEY",
    "MARKER",
    "PRUNE_REFUSES",
    "VERSIONED",
    "Clause",
    "prune_refuses",
    "shows_delta",
]

#: DeerFlow's persisted mode marker (spec, "Marker contract").
CHECKPOINT_MODE_METADATA_KEY = "deerflow_checkpoint_channel_mode"
#: LangGraph's checkpoint metadata key for ``DeltaChannel`` counters.
COUNTERS_METADATA_KEY = "counters_since_delta_snapshot"
#: LangGraph.js's checkpoint metadata key on every checkpoint of a thread its ``DeltaChannel`` graphs started.
DELTA_WRITES_VERSIONED_METADATA_KEY = "delta_writes_versioned"


class Clause(NamedTuple):
    """One clause of the evidence: the value at ``path`` in a checkpoint's metadata."""

    #: ``"marker"``, ``"counters"`` or ``"versioned"``: how the evidence is reported (``mode_evidence``).
    name: str
    #: Keys from the metadata's top level down; every level but the last must be a mapping.
    path: tuple[str, ...]
    #: The string the value must equal; ``None``: the last key being present is enough (any value).
    equals: str | None

    def holds(self, metadata: Mapping[str, Any] | None) -> bool:
        """Whether ``metadata`` satisfies this clause (``None`` or ``{}``: never)."""
        value: Any = metadata
        for key in self.path:
            if not isinstance(value, Mapping) or key not in value:
                return False
            value = value[key]
        return self.equals is None or (isinstance(value, str) and value == self.equals)


MARKER = Clause("marker", (CHECKPOINT_MODE_METADATA_KEY,), "delta")
COUNTERS = Clause("counters", (COUNTERS_METADATA_KEY, "messages"), None)
VERSIONED = Clause("versioned", (DELTA_WRITES_VERSIONED_METADATA_KEY,), None)
#: The evidence, in the order it is reported: a checkpoint shows delta when any clause holds.
DELTA_EVIDENCE = (MARKER, COUNTERS, VERSIONED)
#: LangGraph's own bookkeeping (no DeerFlow marker): what the census reports as "counters only".
BOOKKEEPING = (COUNTERS, VERSIONED)
#: Any ``DeltaChannel``'s counters, whatever its channel (broader than :data:`COUNTERS`).
ANY_COUNTERS = Clause("any_counters", (COUNTERS_METADATA_KEY,), None)
#: What LangGraph's own ``prune`` takes for a delta thread and refuses (checkpoint-postgres
#: ``PRUNE_DELTA_THREADS_SQL``): any channel's counters, or LangGraph.js's key. Broader than the
#: evidence: a thread whose only ``DeltaChannel`` is another channel is full to DeerFlow and still
#: delta to LangGraph's prune.
PRUNE_REFUSES = (ANY_COUNTERS, VERSIONED)


def shows_delta(metadata: Mapping[str, Any] | None) -> bool:
    """Whether checkpoint ``metadata`` carries delta evidence (any clause of :data:`DELTA_EVIDENCE`)."""
    return any(clause.holds(metadata) for clause in DELTA_EVIDENCE)


def prune_refuses(metadata: Mapping[str, Any] | None) -> bool:
    """Whether LangGraph's ``prune`` would take checkpoint ``metadata`` for a delta thread's
    (any clause of :data:`PRUNE_REFUSES`)."""
    return any(clause.holds(metadata) for clause in PRUNE_REFUSES)
