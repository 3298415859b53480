"""Checkpoint channel mode: the per-process freeze, the markers and the gates.

Spec sections implemented here: "Marker contract", "The fail-closed gate",
"Cross-process invariant" (the freeze is module-global per OS process).

Markers (spec, "Marker contract"):

* ``CHECKPOINT_MODE_METADATA_KEY`` (``deerflow_checkpoint_channel_mode``) in
  checkpoint metadata, value ``"delta"``, written only in delta mode; absence
  means full.
* LangGraph's own ``counters_since_delta_snapshot`` metadata dict containing
  ``"messages"``: fallback evidence of delta mode when the marker is absent.
* ``INTERNAL_CHECKPOINT_MODE_KEY`` (``__deerflow_checkpoint_channel_mode``) in
  ``config["configurable"]``: internal routing only, never stored.

The gate is asymmetric: a delta-mode process reads full checkpoints
transparently; a full-mode process refuses delta checkpoints with
:class:`CheckpointModeMismatchError`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from deerflow.errors import (
    MISMATCH_MESSAGE,
    RECONFIGURATION_MESSAGE,
    SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE,
    CheckpointModeMismatchError,
    CheckpointModeReconfigurationError,
)
from deerflow.runtime.delta_evidence import (
    CHECKPOINT_MODE_METADATA_KEY,
    COUNTERS_METADATA_KEY,
    DELTA_WRITES_VERSIONED_METADATA_KEY,
    shows_delta,
)

__all__ = [
    "CHECKPOINT_MODES",
    "CHECKPOINT_MODE_DELTA",
    "CHECKPOINT_MODE_FULL",
    "CHECKPOINT_MODE_METADATA_KEY",
    "COUNTERS_METADATA_KEY",
    "CheckpointMode",
    "CheckpointModeMismatchError",
    "CheckpointModeReconfigurationError",
    "DEFAULT_SNAPSHOT_FREQUENCY",
    "DELTA_WRITES_VERSIONED_METADATA_KEY",
    "INTERNAL_CHECKPOINT_MODE_KEY",
    "MISMATCH_MESSAGE",
    "RECONFIGURATION_MESSAGE",
    "SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE",
    "aensure_checkpoint_mode_compatible",
    "checkpoint_metadata_uses_delta",
    "checkpoint_tuple_uses_delta",
    "copy_config",
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
    "validate_checkpoint_mode",
    "validate_snapshot_frequency",
]

INTERNAL_CHECKPOINT_MODE_KEY = "__deerflow_checkpoint_channel_mode"


class CheckpointMode(StrEnum):
    """A checkpoint channel mode (spec "Checkpoint channel mode"); the values are the strings stored
    in checkpoint metadata and config.yaml's ``checkpoint_channel_mode``."""

    FULL = "full"
    DELTA = "delta"


#: The mode values as plain strings (they are written into checkpoint metadata).
CHECKPOINT_MODE_FULL = CheckpointMode.FULL.value
CHECKPOINT_MODE_DELTA = CheckpointMode.DELTA.value
CHECKPOINT_MODES = (CHECKPOINT_MODE_FULL, CHECKPOINT_MODE_DELTA)
#: DeerFlow's default ``checkpoint_delta.snapshot_frequency`` (updates per snapshot).
DEFAULT_SNAPSHOT_FREQUENCY = 10

_lock = threading.Lock()
#: The process's frozen mode and cadence. DeerFlow's names: its tests (and
#: ours) reset them by name, e.g. ``monkeypatch.setattr(checkpoint_mode,
#: "_frozen_checkpoint_channel_mode", None)``; every reader here looks them up
#: at call time, so such a reset takes effect at once.
_frozen_checkpoint_channel_mode: str | None = None
_frozen_checkpoint_snapshot_frequency: int | None = None


def validate_checkpoint_mode(mode: object) -> str:
    """Return ``mode`` if it is ``"full"`` or ``"delta"``.

    Raises:
        ValueError: naming the bad value and the allowed ones.
    """
    if mode not in CHECKPOINT_MODES:
        raise ValueError(
            f"checkpoint_channel_mode must be one of 'full', 'delta'; got {mode!r}"
        )
    return str(mode)


def validate_snapshot_frequency(value: object) -> int:
    """Return ``value`` if it is an integer >= 1 (count of messages-channel updates).

    Raises:
        ValueError: for a bool, a non-integer, zero or a negative number; the
            text contains DeerFlow's ``snapshot frequency must be positive``
            and names the value given.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            "snapshot frequency must be positive: an integer >= 1 "
            f"(messages-channel updates per snapshot); got {value!r}"
        )
    return value


def freeze_checkpoint_channel_mode(mode: str) -> str:
    """Freeze this process's checkpoint channel mode; idempotent for the same value.

    Args:
        mode: ``"full"`` or ``"delta"``, taken from config.yaml. A mode found in
            a caller's ``configurable`` is deliberately not a parameter here:
            the first freeze takes the application config only.

    Returns:
        The frozen mode.

    Raises:
        ValueError: ``mode`` is not a known mode (nothing is frozen).
        CheckpointModeReconfigurationError: the process already froze another mode.
    """
    global _frozen_checkpoint_channel_mode
    mode = validate_checkpoint_mode(mode)
    with _lock:
        if _frozen_checkpoint_channel_mode is None:
            _frozen_checkpoint_channel_mode = mode
        elif _frozen_checkpoint_channel_mode != mode:
            raise CheckpointModeReconfigurationError(
                RECONFIGURATION_MESSAGE,
                setting="checkpoint_channel_mode",
                frozen=_frozen_checkpoint_channel_mode,
                requested=mode,
            )
        return _frozen_checkpoint_channel_mode


def frozen_checkpoint_channel_mode() -> str | None:
    """The mode frozen in this process, or ``None`` before the first freeze."""
    return _frozen_checkpoint_channel_mode


def freeze_checkpoint_snapshot_frequency(snapshot_frequency: int) -> int:
    """Freeze this process's delta snapshot cadence; idempotent for the same value.

    Args:
        snapshot_frequency: messages-channel updates between ``_DeltaSnapshot``
            blobs, an integer >= 1.

    Returns:
        The frozen cadence.

    Raises:
        ValueError: non-positive or non-integer cadence, raised before anything is frozen.
        CheckpointModeReconfigurationError: another cadence is already frozen
            (message: the ``checkpoint_delta.snapshot_frequency`` twin).
    """
    global _frozen_checkpoint_snapshot_frequency
    snapshot_frequency = validate_snapshot_frequency(snapshot_frequency)
    with _lock:
        if _frozen_checkpoint_snapshot_frequency is None:
            _frozen_checkpoint_snapshot_frequency = snapshot_frequency
        elif _frozen_checkpoint_snapshot_frequency != snapshot_frequency:
            raise CheckpointModeReconfigurationError(
                SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE,
                setting="checkpoint_delta.snapshot_frequency",
                frozen=_frozen_checkpoint_snapshot_frequency,
                requested=snapshot_frequency,
            )
        return _frozen_checkpoint_snapshot_frequency


def frozen_checkpoint_snapshot_frequency() -> int | None:
    """The cadence frozen in this process, or ``None`` before the first freeze."""
    return _frozen_checkpoint_snapshot_frequency


def resolve_checkpoint_snapshot_frequency(snapshot_frequency: int | None = None) -> int:
    """The cadence to compile with: explicit, else frozen, else the default (10).

    Raises:
        ValueError: an explicit value that is not an integer >= 1.
    """
    if snapshot_frequency is not None:
        return validate_snapshot_frequency(snapshot_frequency)
    if _frozen_checkpoint_snapshot_frequency is not None:
        return _frozen_checkpoint_snapshot_frequency
    return DEFAULT_SNAPSHOT_FREQUENCY


def _reset_checkpoint_mode_freeze_for_tests() -> None:
    """Forget the frozen mode and cadence. Tests only: a real process never unfreezes."""
    global _frozen_checkpoint_channel_mode, _frozen_checkpoint_snapshot_frequency
    with _lock:
        _frozen_checkpoint_channel_mode = None
        _frozen_checkpoint_snapshot_frequency = None


def inject_checkpoint_mode(config: dict[str, Any] | None, mode: str | None = None) -> dict[str, Any]:
    """Write the mode marker into ``config`` in place (DeerFlow's contract) and return it.

    ``config["configurable"]`` gets ``INTERNAL_CHECKPOINT_MODE_KEY = mode``. In
    delta mode ``config["metadata"]`` gets ``CHECKPOINT_MODE_METADATA_KEY =
    "delta"``; in full mode that key is removed, so absence means full (spec,
    "Marker contract"). Missing (or ``None``) ``configurable`` / ``metadata``
    entries are created as new dicts; existing ones are changed in place. To
    leave a caller's dicts untouched, copy first, as
    :meth:`CheckpointStateAccessor.prepare_config` and
    :func:`deerflow.runtime.run_config.build_run_config` do.

    Args:
        config: a LangGraph ``RunnableConfig`` dict; ``None`` gets a new dict.
        mode: the mode to inject; defaults to the frozen mode.

    Returns:
        ``config`` itself (the new dict when ``config`` was ``None``). DeerFlow's
        returns ``None``; callers written for it ignore the value.

    Raises:
        ValueError: no mode given and none frozen, or an unknown mode;
            ``config`` is not changed.
        CheckpointModeReconfigurationError: the process is frozen and the
            caller-supplied internal key names another mode; ``config`` is not changed.
    """
    frozen = _frozen_checkpoint_channel_mode
    if mode is None:
        if frozen is None:
            raise ValueError(
                "No checkpoint channel mode given and none frozen; call "
                "freeze_checkpoint_channel_mode() at process start-up."
            )
        mode = frozen
    mode = validate_checkpoint_mode(mode)
    out: dict[str, Any] = {} if config is None else config
    supplied = (out.get("configurable") or {}).get(INTERNAL_CHECKPOINT_MODE_KEY)
    if supplied is not None and frozen is not None and supplied != frozen:
        raise CheckpointModeReconfigurationError(
            RECONFIGURATION_MESSAGE,
            setting="checkpoint_channel_mode",
            frozen=frozen,
            requested=supplied,
        )
    if out.get("configurable") is None:
        out["configurable"] = {}
    if out.get("metadata") is None:
        out["metadata"] = {}
    out["configurable"][INTERNAL_CHECKPOINT_MODE_KEY] = mode
    if mode == CHECKPOINT_MODE_DELTA:
        out["metadata"][CHECKPOINT_MODE_METADATA_KEY] = CHECKPOINT_MODE_DELTA
    else:
        out["metadata"].pop(CHECKPOINT_MODE_METADATA_KEY, None)
    return out


def copy_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A shallow copy of ``config`` with its ``configurable`` and ``metadata`` dicts copied too.

    What the accessor hands to :func:`inject_checkpoint_mode`, so the
    caller's dicts stay untouched. Returns a new dict (``{}`` for ``None``).
    """
    out: dict[str, Any] = dict(config or {})
    out["configurable"] = dict(out.get("configurable") or {})
    out["metadata"] = dict(out.get("metadata") or {})
    return out


def checkpoint_metadata_uses_delta(metadata: Mapping[str, Any] | None) -> bool:
    """True when checkpoint metadata shows delta mode.

    Evidence (spec, "Marker contract"): the DeerFlow marker equal to
    ``"delta"``, or LangGraph's ``counters_since_delta_snapshot`` dict holding
    a ``"messages"`` entry -- the one definition in
    :mod:`deerflow.runtime.delta_evidence`, whose SQL twin the inventory, the
    census and the rewrites use. Snapshot checkpoints drop the counters, so a
    marker-less thread looks full there; see the reader's lineage gate.
    """
    return shows_delta(metadata)


def checkpoint_tuple_uses_delta(checkpoint_tuple: Any) -> bool:
    """True when a checkpoint tuple's metadata shows delta mode; ``None`` is False.

    Duck-typed like DeerFlow's: any object with ``.metadata`` will do (a saver
    ``CheckpointTuple``, a ``SimpleNamespace(metadata=..., checkpoint=...)``);
    one without ``.metadata`` reads as full.
    """
    if checkpoint_tuple is None:
        return False
    return checkpoint_metadata_uses_delta(getattr(checkpoint_tuple, "metadata", None))


def state_snapshot_uses_delta(snapshot: Any) -> bool:
    """True when a LangGraph ``StateSnapshot``'s metadata shows delta mode; ``None`` is False."""
    if snapshot is None:
        return False
    return checkpoint_metadata_uses_delta(getattr(snapshot, "metadata", None))


def _thread_id_of(config: Any) -> str | None:
    if not isinstance(config, Mapping):
        return None
    value = (config.get("configurable") or {}).get("thread_id")
    return None if value is None else str(value)


def raise_if_snapshot_incompatible(snapshot: Any, mode: str) -> None:
    """Gate for materialized reads (``get_state``, ``get_state_history``).

    ``snapshot`` is anything with ``.metadata``; ``.config`` is optional and
    only supplies the error's ``thread_id``.

    Raises:
        CheckpointModeMismatchError: ``mode`` is not delta and the snapshot's
            metadata shows delta mode. No extra round-trip is made.
    """
    if mode != CHECKPOINT_MODE_DELTA and state_snapshot_uses_delta(snapshot):
        raise CheckpointModeMismatchError(
            MISMATCH_MESSAGE, thread_id=_thread_id_of(getattr(snapshot, "config", None))
        )


def raise_if_checkpoint_tuple_incompatible(checkpoint_tuple: Any, mode: str) -> None:
    """Gate for metadata-only reads (``get_metadata``); materializes nothing.

    ``checkpoint_tuple`` is anything with ``.metadata`` (and ``.checkpoint``);
    ``.config`` is optional and only supplies the error's ``thread_id``.

    Raises:
        CheckpointModeMismatchError: ``mode`` is not delta and the tuple's
            metadata shows delta mode.
    """
    if mode != CHECKPOINT_MODE_DELTA and checkpoint_tuple_uses_delta(checkpoint_tuple):
        raise CheckpointModeMismatchError(
            MISMATCH_MESSAGE, thread_id=_thread_id_of(getattr(checkpoint_tuple, "config", None))
        )


def ensure_checkpoint_mode_compatible(checkpointer: Any, config: Mapping[str, Any], mode: str) -> None:
    """Pre-write gate: fail closed before a write is persisted.

    Returns immediately in delta mode (no saver call). Otherwise fetches the
    checkpoint ``config`` addresses (the head when it names none) with
    ``checkpointer.get_tuple`` and applies
    :func:`raise_if_checkpoint_tuple_incompatible`.

    Raises:
        CheckpointModeMismatchError: the addressed checkpoint shows delta mode.
    """
    if mode == CHECKPOINT_MODE_DELTA:
        return
    checkpoint_tuple = checkpointer.get_tuple(config)
    try:
        raise_if_checkpoint_tuple_incompatible(checkpoint_tuple, mode)
    except CheckpointModeMismatchError as exc:
        exc.thread_id = exc.thread_id or _thread_id_of(config)
        raise


async def aensure_checkpoint_mode_compatible(checkpointer: Any, config: Mapping[str, Any], mode: str) -> None:
    """Async twin of :func:`ensure_checkpoint_mode_compatible` (uses ``aget_tuple``)."""
    if mode == CHECKPOINT_MODE_DELTA:
        return
    checkpoint_tuple = await checkpointer.aget_tuple(config)
    try:
        raise_if_checkpoint_tuple_incompatible(checkpoint_tuple, mode)
    except CheckpointModeMismatchError as exc:
        exc.thread_id = exc.thread_id or _thread_id_of(config)
        raise
