"""A checkpoint's delta evidence: one definition, read in Python and generated as SQL.

DeerFlow decides a checkpoint's mode from its metadata alone (spec, "Marker
contract"; DeerFlow's ``checkpoint_metadata_uses_delta``). The evidence is a
disjunction of clauses, each a path into the metadata and an expected value::

    marker    metadata["deerflow_checkpoint_channel_mode"] == "delta"
    counters  "messages" in metadata["counters_since_delta_snapshot"]   (a mapping; any value, null too)

    shows_delta(metadata) == marker(metadata) or counters(metadata)

Only ``"delta"`` is a marker: DeerFlow writes no other value and a full-mode
process removes the key, so a marker with another value (``"full"``, ``""``,
a number) is no evidence. LangGraph's own keys other than the ``messages``
counters (other channels' counters, LangGraph.js's ``delta_writes_versioned``)
are not DeerFlow's evidence either: a full-mode DeerFlow process reads such a
checkpoint, so the gates, the census and the rewrites must too.

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
    "CHECKPOINT_MODE_METADATA_KEY",
    "COUNTERS",
    "COUNTERS_METADATA_KEY",
    "DELTA_EVIDENCE",
    "MARKER",
    "Clause",
    "shows_delta",
]

#: DeerFlow's persisted mode marker (spec, "Marker contract").
CHECKPOINT_MODE_METADATA_KEY = "deerflow_checkpoint_channel_mode"
#: LangGraph's checkpoint metadata key for ``DeltaChannel`` counters.
COUNTERS_METADATA_KEY = "counters_since_delta_snapshot"


class Clause(NamedTuple):
    """One clause of the evidence: the value at ``path`` in a checkpoint's metadata."""

    #: ``"marker"`` or ``"counters"``: how the evidence is reported (``mode_evidence``).
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
#: The evidence, in the order it is reported: a checkpoint shows delta when any clause holds.
DELTA_EVIDENCE = (MARKER, COUNTERS)


def shows_delta(metadata: Mapping[str, Any] | None) -> bool:
    """Whether checkpoint ``metadata`` carries delta evidence (any clause of :data:`DELTA_EVIDENCE`)."""
    return any(clause.holds(metadata) for clause in DELTA_EVIDENCE)
