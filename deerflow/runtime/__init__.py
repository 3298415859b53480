"""DeerFlow's channel-mode runtime: the mode freeze, markers, gates, the state schemas and the accessor.

Re-exports the public names of :mod:`deerflow.runtime.checkpoint_mode` and
:mod:`deerflow.runtime.checkpoint_state` (a test checks the list).
"""

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_METADATA_KEY,
    INTERNAL_CHECKPOINT_MODE_KEY,
    CheckpointModeMismatchError,
    CheckpointModeReconfigurationError,
    aensure_checkpoint_mode_compatible,
    checkpoint_metadata_uses_delta,
    checkpoint_tuple_uses_delta,
    ensure_checkpoint_mode_compatible,
    freeze_checkpoint_channel_mode,
    freeze_checkpoint_snapshot_frequency,
    frozen_checkpoint_channel_mode,
    frozen_checkpoint_snapshot_frequency,
    inject_checkpoint_mode,
    raise_if_checkpoint_tuple_incompatible,
    raise_if_snapshot_incompatible,
    resolve_checkpoint_snapshot_frequency,
    state_snapshot_uses_delta,
)

# The accessor's module imports LangGraph: it is imported when one of its names is first read
# (:mod:`deerflow._lazy`), so the mode freeze and markers stay cheap to import.
__getattr__, __dir__ = lazy_exports(__name__, {
    "CheckpointStateAccessor": "checkpoint_state",
    "DegradedFullModeReadAccessor": "checkpoint_state",
    "build_state_mutation_graph": "checkpoint_state",
})

if TYPE_CHECKING:
    from deerflow.runtime.checkpoint_state import (
        CheckpointStateAccessor,
        DegradedFullModeReadAccessor,
        build_state_mutation_graph,
    )

__all__ = [
    "CHECKPOINT_MODE_METADATA_KEY",
    "CheckpointModeMismatchError",
    "CheckpointModeReconfigurationError",
    "CheckpointStateAccessor",
    "DegradedFullModeReadAccessor",
    "INTERNAL_CHECKPOINT_MODE_KEY",
    "aensure_checkpoint_mode_compatible",
    "build_state_mutation_graph",
    "checkpoint_metadata_uses_delta",
    "checkpoint_tuple_uses_delta",
    "ensure_checkpoint_mode_compatible",
    "freeze_checkpoint_channel_mode",
    "freeze_checkpoint_snapshot_frequency",
    "frozen_checkpoint_channel_mode",
    "frozen_checkpoint_snapshot_frequency",
    "inject_checkpoint_mode",
    "raise_if_checkpoint_tuple_incompatible",
    "raise_if_snapshot_incompatible",
    "resolve_checkpoint_snapshot_frequency",
    "state_snapshot_uses_delta",
]
