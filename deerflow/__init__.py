"""DeerFlow checkpoint channel-mode runtime, importable without Django.

Implements the contract in ``docs/channel-modes.md`` (copied from the
project's seed specification): the state schemas
(:mod:`deerflow.agents.thread_state`), the per-process mode freeze, markers and
fail-closed gates (:mod:`deerflow.runtime.checkpoint_mode`), the
:class:`~deerflow.runtime.checkpoint_state.CheckpointStateAccessor`, DeerFlow's
``config.yaml`` database block (:mod:`deerflow.config`), a saver factory
(:mod:`deerflow.savers`) and metadata-only inventory queries
(:mod:`deerflow.inventory`).
"""

__version__ = "0.1.0"
