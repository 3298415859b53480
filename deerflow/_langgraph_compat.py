"""Every private LangGraph name this project relies on, in one place.

LangGraph keeps these out of its public API, so a release may move or change
them without notice. Importing them only here means an upgrade breaks one
module, loudly, at import; ``tests/deerflow/test_langgraph_compat.py`` checks
each assumption below against the installed release (the CI runs it at the
minimum and the newest releases).

They keep LangGraph's own names (so code reads as LangGraph's does). Names and what we assume of them:

* :class:`_DeltaSnapshot` (``langgraph.checkpoint.serde.types``):
  the stored form of a ``DeltaChannel`` snapshot; ``_DeltaSnapshot(value).value``
  is ``value`` and the checkpoint serializer round-trips it.
* :func:`_get_overwrite` (``langgraph.channels.binop``):
  ``(True, payload)`` for the stored ``Overwrite`` forms (the object,
  ``{"__overwrite__": payload}``), ``(False, None)`` otherwise.
* :data:`MISSING` (``langgraph._internal._typing``): the value of a
  ``BinaryOperatorAggregate`` channel whose type has no zero value (``list | None``)
  before its first write.
* :data:`DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT`
  (``langgraph._internal._config``): supersteps after which LangGraph stores a
  snapshot whatever the update count (a positive int).
* :data:`CONFIG_KEY_CHECKPOINTER` (``langgraph._internal._constants``): the
  ``configurable`` key under which Pregel looks up the checkpointer of a run
  (a string).
* :func:`_delta_channels_to_replay` (``langgraph.pregel._checkpoint``):
  ``_delta_channels_to_replay(specs, checkpoint)`` lists the ``DeltaChannel``
  names of ``specs`` that ``get_state`` rebuilds through
  ``get_delta_channel_history`` -- those with a version in ``channel_versions``
  and nothing (not even ``None``) stored in ``channel_values``; the others read
  ``from_checkpoint(stored)``.
* :data:`_algo` (the module ``langgraph.pregel._algo``): the module whose
  ``_xxhash_str`` / ``_uuid5_str`` derive task ids from a checkpoint id
  (``deerflow.seed.ids`` wraps them to record ids).
"""

from __future__ import annotations

import langgraph.pregel._algo as _algo
from langgraph._internal._config import DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER
from langgraph._internal._typing import MISSING
from langgraph.channels.binop import _get_overwrite
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.pregel._checkpoint import _delta_channels_to_replay

__all__ = ["CONFIG_KEY_CHECKPOINTER", "DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT", "MISSING", "_DeltaSnapshot",
           "_algo", "_delta_channels_to_replay", "_get_overwrite"]
