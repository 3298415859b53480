"""LangGraph's own delta reader, as the converter and the compactor consult it.

:func:`delta_accessor` is the one place that builds a delta-mode
:class:`~deerflow.runtime.checkpoint_state.CheckpointStateAccessor` over a
saver (LangGraph's read path: ``get_tuple``, one batched
``get_delta_channel_history``, ``from_checkpoint`` + ``replay_writes``);
:func:`read_digest` reads one checkpoint's ``messages`` digest through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from deerflow.convert.report import Abort
from deerflow.convert.storage import ConversionSession
from deerflow.convert.walk import config_for
from deerflow.digest import messages_sha256
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

__all__ = ["check_against_langgraph", "delta_accessor", "read_digest"]


def delta_accessor(saver: Any) -> CheckpointStateAccessor:
    """A delta-mode accessor over ``saver`` (any sync LangGraph saver); reading does not depend on the cadence."""
    return CheckpointStateAccessor.for_saver(saver, mode="delta")


def read_digest(accessor: CheckpointStateAccessor, thread_id: str, ns: str, checkpoint_id: str,
                digest: Callable[[list[Any]], str] = messages_sha256) -> tuple[str | None, str | None]:
    """``(messages_sha256, None)`` of one checkpoint read through ``accessor``, or ``(None, error)``.

    ``digest`` computes :func:`~deerflow.digest.messages_sha256` (e.g. a caching
    :class:`~deerflow.convert.encoding.MessageDigester`). A reader that raises is
    reported, not propagated: ``error`` is ``"<Type>: <message>"``.
    """
    try:
        snapshot = accessor.get(config_for(thread_id, ns, checkpoint_id))
        return digest(snapshot.values.get("messages") or []), None
    except Exception as exc:  # noqa: BLE001 - a reader failure is a difference, reported by the caller
        return None, f"{type(exc).__name__}: {exc}"


def check_against_langgraph(session: ConversionSession, thread_id: str,
                            digests: Iterable[tuple[str, str, str | None] | tuple[str, str, str | None, str | None]]
                            ) -> None:
    """The integrity check: every checkpoint's one-pass digest against LangGraph's own delta reader.

    Args:
        digests: ``[(checkpoint_ns, checkpoint_id, one-pass digest[, differs])]`` in walk order;
            ``differs`` (:attr:`deerflow.convert.onepass.Materialized.differs`) marks a checkpoint
            where the replay rule knowingly departs from LangGraph's reader (a stored ``None``, the
            input child of a fork); a difference there is expected (reported as a finding), not a mismatch.

    Raises:
        Abort: ``integrity_mismatch`` at the first checkpoint (walk order) where the
            digests differ or LangGraph's reader fails; ``first_difference`` is
            ``{checkpoint_id, checkpoint_ns, onepass_sha256, langgraph_sha256}``
            (``langgraph_sha256`` ``None`` and ``langgraph_error`` set when the reader
            raised or returned something that is not a message list).
    """
    accessor = delta_accessor(session.saver)
    for ns, cid, ours, *rest in digests:
        if rest and rest[0] is not None:
            continue
        theirs, error = read_digest(accessor, thread_id, ns, cid)
        if theirs != ours:
            difference = {"checkpoint_id": cid, "checkpoint_ns": ns, "onepass_sha256": ours,
                          "langgraph_sha256": theirs}
            if error is not None:
                difference["langgraph_error"] = error
            raise Abort(
                "integrity_mismatch",
                f"one-pass materialization differs from LangGraph's reader at checkpoint {cid}"
                + (f" (namespace {ns})" if ns else "")
                + (f"; LangGraph's reader failed: {error}" if error else ""),
                "The stored delta history does not replay consistently. Inspect the thread's history; "
                "do not convert until an operator has decided which value is right.",
                difference,
            )
