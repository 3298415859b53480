"""The one builder of every LangGraph run config the dashboard and workers use.

Spec, "Marker contract" (``INTERNAL_CHECKPOINT_MODE_KEY``): a caller-supplied
``__deerflow_checkpoint_channel_mode`` is discarded here, ignored by the first
freeze (which takes config.yaml), and rejected once the process is frozen
(by :func:`inject_checkpoint_mode`, which this builder calls after discarding
it, so only a mode passed explicitly can conflict).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow.runtime.checkpoint_mode import INTERNAL_CHECKPOINT_MODE_KEY, inject_checkpoint_mode

__all__ = ["build_run_config"]


def build_run_config(
    thread_id: str,
    *,
    checkpoint_id: str | None = None,
    checkpoint_ns: str = "",
    configurable: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    mode: str | None = None,
) -> dict[str, Any]:
    """A fresh ``RunnableConfig`` addressing one thread (and optionally one checkpoint).

    Args:
        thread_id: the LangGraph thread id.
        checkpoint_id: a checkpoint to address; ``None`` means the namespace head.
        checkpoint_ns: the namespace (``""`` is the root graph).
        configurable: extra caller keys; the internal mode key is dropped from it.
        metadata: extra run metadata (copied).
        mode: the mode to inject; default the frozen mode.

    Returns:
        ``{"configurable": {..., "thread_id", "checkpoint_ns"[, "checkpoint_id"],
        INTERNAL_CHECKPOINT_MODE_KEY: mode}, "metadata": {...}}`` — new dicts
        only; nothing passed in is mutated.

    Raises:
        ValueError: no mode given and none frozen.
        CheckpointModeReconfigurationError: ``mode`` differs from the frozen mode.
    """
    conf = {k: v for k, v in (configurable or {}).items() if k != INTERNAL_CHECKPOINT_MODE_KEY}
    conf["thread_id"] = str(thread_id)
    conf["checkpoint_ns"] = checkpoint_ns
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    if mode is not None:
        conf[INTERNAL_CHECKPOINT_MODE_KEY] = mode
    return inject_checkpoint_mode({"configurable": conf, "metadata": dict(metadata or {})}, mode)
