"""LangGraph's delta read rule for ``messages``, replayed once along a thread's checkpoint tree.

What ``graph.get_state`` returns for one delta checkpoint (LangGraph's
``channels_from_checkpoint``; spec, "Storage shape and read path"):

* the target stores a value, or has no ``messages`` version (LangGraph's
  ``_delta_channels_to_replay`` decides): ``DeltaChannel.from_checkpoint(stored)``
  -- a stored ``None`` or nothing reads ``[]``;
* otherwise ``get_delta_channel_history`` walks the parent chain to the
  nearest ancestor that is a *seed*, and the channel is
  ``from_checkpoint(seed)`` plus ``replay_writes`` of the ``messages`` writes
  stored under the seed and every checkpoint after it on the path (each
  checkpoint's writes in ``writes_sort_key`` order, ``(task_path, task_id, idx)``).
  Which ancestor is a seed is the saver's rule: LangGraph's base reader and
  ``SqliteSaver`` stop at any stored value, a stored ``None`` included (the
  value restarts from ``[]`` there); ``PostgresSaver`` stops at a
  ``messages`` blob or a non-null inline value, so it passes a stored ``None``.

:class:`LangGraphRule` computes that value for every checkpoint of a
namespace in one walk from the root, handing the channel from parent to
child with LangGraph's own ``DeltaChannel`` (the delta accessor's compiled
channel, so the same reducer): one ``replay_writes`` per checkpoint instead
of one history fetch and a replay of up to K checkpoints per read. Replaying
the same writes in per-checkpoint batches gives the single call's value
because ``DeltaChannel`` requires its reducer to be batching-invariant
(LangGraph's ``DeltaChannel`` docstring); the callers still read a sample of
checkpoints through the real reader (:func:`real_reads`) and
``tests/deerflow/convert/test_langgraph_rule.py`` checks every checkpoint of the real
fixture against ``get_state`` on both backends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deerflow._langgraph_compat import MISSING, _delta_channels_to_replay
from deerflow.convert.delta_reader import delta_accessor, read_digest
from deerflow.convert.onepass import SharedPrefix
from deerflow.convert.reading import iter_session_checkpoints
from deerflow.storage.sessions import ConversionSession

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointTuple, PendingWrite

__all__ = ["LangGraphRule", "RuleRead", "real_reads", "sample_points"]

MESSAGES = "messages"


def _task_order(paths: dict[tuple[str, str, str], str], ns: str,
                checkpoint_id: str) -> Callable[[PendingWrite], tuple[str, str]]:
    """The sort key of one checkpoint's pending writes: ``(task_path, task_id)`` (a missing path sorts first)."""

    def key(write: PendingWrite) -> tuple[str, str]:
        return (paths.get((ns, checkpoint_id, write[0])) or "", write[0])

    return key


@dataclass(frozen=True)
class RuleRead:
    """One checkpoint as LangGraph's reader would read it.

    Attributes:
        checkpoint_ns, checkpoint_id: the checkpoint.
        digest: :func:`~deerflow.convert.digest.messages_sha256` of its ``messages`` value;
            ``None`` when the reader would fail (then ``error`` says why).
        error: ``"<Type>: <message>"`` of the failure, else ``None``.
    """

    checkpoint_ns: str
    checkpoint_id: str
    digest: str | None
    error: str | None = None


def _stored(values: dict[str, Any]) -> Any:
    """The stored ``messages`` value (``MISSING`` when absent); a compaction walk's
    :class:`~deerflow.convert.onepass.SharedPrefix` is the list it stands for."""
    value = values.get(MESSAGES, MISSING)
    return value.resolve() if isinstance(value, SharedPrefix) else value


def _seed_rule(saver: BaseCheckpointSaver[Any]) -> Callable[[dict[str, Any]], bool]:
    """``is_seed(channel_values)`` for an ancestor, as ``saver.get_delta_channel_history`` decides it."""
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:  # pragma: no cover - the postgres extra is installed with the project
        PostgresSaver = ()  # type: ignore[assignment,misc]  # noqa: N806
    if isinstance(saver, PostgresSaver):
        return lambda values: values.get(MESSAGES) is not None
    return lambda values: MESSAGES in values


class LangGraphRule:
    """LangGraph's read of ``messages`` at every checkpoint of a thread, in one walk per namespace.

    Args:
        saver: the sync LangGraph saver the rows are read through (SQLite or
            Postgres; its class decides the seed rule).
        digest: ``messages -> hex SHA-256`` (e.g. a caching
            :class:`~deerflow.convert.encoding.MessageDigester`).
    """

    def __init__(self, saver: BaseCheckpointSaver[Any], digest: Callable[[list[Any]], str]):
        self.saver, self.digest = saver, digest
        self.spec = delta_accessor(saver).graph.channels[MESSAGES]  # LangGraph's DeltaChannel, DeerFlow's reducer
        self.is_seed = _seed_rule(saver)
        #: After :meth:`read_namespace`: True when that namespace was one tree (one root, every checkpoint
        #: reached), so LangGraph's own reader can walk any of its chains without meeting a cycle.
        self.sound = False

    def read_thread(self, session: ConversionSession, thread_id: str) -> Iterator[RuleRead]:
        """Every checkpoint of every namespace, read a page at a time in ``session``'s transaction.

        The pages are ``session.saver``'s tuples
        (:func:`~deerflow.convert.reading.iter_session_checkpoints`): build the rule
        with that saver.

        Yields:
            :class:`RuleRead` per stored checkpoint, parents before children;
            checkpoints no root reaches (a cycle) read as failures.
        """
        paths = session.task_paths(thread_id)
        for ns in session.namespaces(thread_id):
            yield from self.read_namespace(ns, iter_session_checkpoints(session, thread_id, ns), paths)

    def read_namespace(self, ns: str, tuples: Iterable[CheckpointTuple],
                       paths: dict[tuple[str, str, str], str]) -> Iterator[RuleRead]:
        """The reads of one namespace from the saver's ``CheckpointTuple`` s (any order, pending writes included).

        Args:
            paths: ``{(checkpoint_ns, checkpoint_id, task_id): task_path}`` of the ``messages`` writers.
        """
        nodes: dict[str, tuple[Checkpoint, str | None, list[PendingWrite]]] = {}
        for tup in tuples:
            cid = tup.config["configurable"]["checkpoint_id"]
            parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
            writes = [w for w in tup.pending_writes or [] if w[1] == MESSAGES]
            writes.sort(key=_task_order(paths, ns, cid))  # stable: idx order kept
            nodes[cid] = (tup.checkpoint, parent, writes)
        children: dict[str | None, list[str]] = {}
        for cid, (_checkpoint, parent, _writes) in nodes.items():
            # a parent that is not stored ends LangGraph's walk there: the chain starts empty
            children.setdefault(parent if parent in nodes else None, []).append(cid)
        specs = {MESSAGES: self.spec}
        replays = {cid: bool(_delta_channels_to_replay(specs, checkpoint))
                   for cid, (checkpoint, _p, _w) in nodes.items()}
        # a child reads its parent's channel when it is replayed, or passes it on when it is no seed
        inherits = {cid: replays[cid] or not self.is_seed(checkpoint["channel_values"])
                    for cid, (checkpoint, _p, _w) in nodes.items()}
        # (checkpoint id, channel as the walk reaches it from below: value to pass down, or the replay error)
        stack: list[tuple[str, Any, str | None]] = [(cid, self.spec.from_checkpoint(MISSING), None)
                                                    for cid in sorted(children.get(None, []), reverse=True)]
        seen: set[str] = set()
        while stack:
            cid, inherited, error = stack.pop()
            seen.add(cid)
            checkpoint, _parent, writes = nodes[cid]
            values = checkpoint["channel_values"]
            if replays[cid]:
                yield self._read(ns, cid, inherited, error)
            else:
                yield self._read(ns, cid, self.spec.from_checkpoint(_stored(values)), None)
            kids = sorted(children.get(cid, []), reverse=True)
            if not any(inherits[k] for k in kids):
                stack.extend((kid, None, None) for kid in kids)  # every child reads its own stored value
                continue
            down, down_error = inherited, error
            if self.is_seed(values):
                down, down_error = self.spec.from_checkpoint(_stored(values)), None
            if writes and down_error is None:
                down = down.copy()
                try:
                    down.replay_writes(writes)
                except Exception as exc:  # noqa: BLE001 - LangGraph's reader raises the same at these reads
                    down_error = f"{type(exc).__name__}: {exc}"
            stack.extend((kid, down, down_error) for kid in kids)
        self.sound = len(children.get(None, [])) == 1 and len(seen) == len(nodes)
        for cid in sorted(set(nodes) - seen):
            yield RuleRead(ns, cid, None, "cycle: no root reaches this checkpoint")

    def _read(self, ns: str, cid: str, channel: Any, error: str | None) -> RuleRead:
        if error is not None:
            return RuleRead(ns, cid, None, error)
        value = None if channel.value is MISSING else channel.value  # an empty channel is left out of the values
        try:
            return RuleRead(ns, cid, self.digest(value or []))
        except Exception as exc:  # noqa: BLE001 - a value that is no message list fails the read
            return RuleRead(ns, cid, None, f"{type(exc).__name__}: {exc}")


def sample_points(order: Iterable[tuple[str, str]], extra: Iterable[tuple[str, str]] = (),
                  spread: int = 4) -> list[tuple[str, str]]:
    """The checkpoints to read through the real reader: every namespace head, ``extra``, and ``spread`` more.

    Args:
        order: ``[(checkpoint_ns, checkpoint_id)]`` of the thread (any order).
        extra: positions that must be read (e.g. snapshot seams).
        spread: further checkpoints, evenly spaced over the thread (count).

    Returns:
        Distinct ``(checkpoint_ns, checkpoint_id)`` pairs, sorted.
    """
    keys = sorted(set(order))
    heads: dict[str, str] = {}
    for ns, cid in keys:
        heads[ns] = max(cid, heads.get(ns, cid))
    chosen = set(heads.items()) | set(extra)
    if keys and spread > 0:
        step = max(1, len(keys) // (spread + 1))
        chosen |= set(keys[step::step][:spread])
    return sorted(chosen)


def real_reads(saver: BaseCheckpointSaver[Any], thread_id: str, points: Iterable[tuple[str, str]],
               digest: Callable[[list[Any]], str]) -> Iterator[tuple[str, str, str | None, str | None]]:
    """``(checkpoint_ns, checkpoint_id, digest, error)`` of each point read through LangGraph's own reader.

    The delta accessor (``graph.get_state``: ``get_tuple``, ``get_delta_channel_history``,
    ``from_checkpoint`` + ``replay_writes``) over ``saver``; see :func:`~deerflow.convert.delta_reader.read_digest`.
    """
    accessor = delta_accessor(saver)
    for ns, cid in points:
        got, error = read_digest(accessor, thread_id, ns, cid, digest)
        yield ns, cid, got, error
