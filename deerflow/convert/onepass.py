"""One-pass materialization of a delta ``messages`` channel over a checkpoint tree.

The rule is LangGraph's own read path for ``DeltaChannel`` (spec, "Storage
shape and read path"; ``BaseCheckpointSaver.get_delta_channel_history`` and
``DeltaChannel.replay_writes``), applied once per checkpoint instead of once
per read::

    value(c) = seed(c)                                   if c stores a value
    value(c) = replay(value(parent(c)), writes_at(parent(c)))   otherwise
    value(root) = []                                     when the root stores nothing

where the root is the namespace's first checkpoint (smallest id; any other
parentless checkpoint is a ``null_parent`` finding), a seed is a stored
``_DeltaSnapshot`` (its ``.value``) or a plain pre-delta list (a stored
``None`` is not a seed, although LangGraph's reader restarts from ``[]``
there: the integrity check reports that difference), ``writes_at(p)`` are the
``messages`` writes stored under checkpoint ``p`` in the saver's
``(task_path, task_id, idx)`` order, and ``replay`` resets at the last
``Overwrite`` and folds the rest with :func:`merge_message_writes`. Lineage
follows ``parent_checkpoint_id`` only, never ``step`` or time, and never
leaves one ``checkpoint_ns``.

Findings (never silently wrong values):

* ``dangling_parent`` / ``cycle``: the tree cannot be walked; the affected
  checkpoints get no value.
* ``null_parent``: a checkpoint other than the namespace's first (smallest
  id) has no parent, so the history before it is unknown; unless it stores
  a seed, it and its seedless descendants get no value (never ``[]`` as if
  complete).
* ``missing_writes``: a checkpoint's ``messages`` version differs from its
  parent's, it stores no seed, yet the parent holds no ``messages`` write
  (pruned writes); it and its seedless descendants get no value.
* ``branch_point``: a parent with several children stores all their writes
  under its own id, so a child without its own seed sees its siblings'
  writes too (LangGraph reads it that way; reported). Which children
  consumed them is decided by ``fork_input`` and ``branch_ambiguous`` below.
* ``order_unknown``: writes of several tasks at one checkpoint carry no
  ``task_path``, so their live order is unknown (sorted by ``task_id``).
* ``overwrite_in_blob``: a stored value was an ``Overwrite`` wrapper; unwrapped.
* ``bad_stored_value``: the stored value is no message list (e.g. Postgres's
  inline ``true`` snapshot marker whose blob row is gone); that checkpoint
  and its seedless descendants get no value.
* ``reducer_error``: replaying the writes stored under a parent raised (e.g.
  ``RemoveMessage`` of an unknown id); reported on each child without its
  own seed, which (with its seedless descendants) gets no value.
* ``stored_none``: a checkpoint stores ``messages = None``; it is no seed (the
  walk goes on past it), but LangGraph's base and SQLite readers restart from
  ``[]`` there (LangGraph #8686), so they read it and its seedless descendants
  differently (:attr:`Materialized.differs`).
* ``fork_input``: a checkpoint holds ``messages`` writes and a seedless child
  of it is an ``input`` checkpoint (``metadata.source``): LangGraph's input
  step applies the new input to the parent's values and abandons the parent's
  pending tasks, so that child consumed none of the writes stored there
  (DeerFlow #4458); LangGraph's reader replays them into it anyway
  (:attr:`Materialized.differs`). Decided from the child's stored data alone,
  however many siblings it has (so pruning a sibling changes nothing).
* ``branch_ambiguous``: a branch point holds writes and two or more of its
  seedless children may have consumed them (any source but ``input``): the
  stored data does not say which write belongs to which child (LangGraph
  #8443). Reported on each such child (the detail names the branch point),
  blocking; the value kept is LangGraph's reading (every write), for a caller
  that acknowledges it.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, BaseMessageChunk, RemoveMessage

from deerflow._langgraph_compat import _DeltaSnapshot, _get_overwrite
from deerflow.agents.thread_state import merge_message_writes
from deerflow.convert.shared_prefix import SharedPrefix

__all__ = ["CheckpointNode", "Finding", "Materialized", "SharedPrefix", "materialize_namespace", "replay",
           "stored_seed"]

MESSAGES = "messages"


@dataclass(frozen=True)
class Finding:
    """Something about a checkpoint the operator must know.

    Attributes:
        kind: ``dangling_parent``, ``cycle``, ``null_parent``, ``missing_writes``,
            ``branch_point``, ``order_unknown``, ``overwrite_in_blob``, ``bad_stored_value``,
            ``reducer_error``, ``stored_none``, ``fork_input`` or ``branch_ambiguous``.
        checkpoint_id: the checkpoint concerned.
        detail: one human-readable sentence.
        blocking: True when the value at ``checkpoint_id`` cannot be trusted.
    """

    kind: str
    checkpoint_id: str
    detail: str
    blocking: bool


@dataclass
class CheckpointNode:
    """What the walk needs of one stored checkpoint.

    Attributes:
        checkpoint_id, parent_id: ids within one namespace (``parent_id`` None for a root).
        stored: ``channel_values.get("messages")`` as the saver returned it.
        writes: ``[(task_id, value, task_path)]`` for ``messages`` stored under this
            checkpoint, in the saver's order (``task_path`` may be ``None`` if unknown).
        version: ``channel_versions.get("messages")`` (``None``: never written, or
            unknown; then the ``missing_writes`` check is skipped for this checkpoint).
        stored_none: ``messages`` is a key of the stored ``channel_values`` with the value ``None``.
        source: ``metadata["source"]`` (``input``, ``loop``, ``update``, ...; ``None`` if unknown).
    """

    checkpoint_id: str
    parent_id: str | None
    stored: Any
    writes: list[tuple[str, Any, str | None]] = field(default_factory=list)
    version: Any = None
    stored_none: bool = False
    source: str | None = None


@dataclass(frozen=True)
class Materialized:
    """One checkpoint's one-pass value (``None`` when a blocking finding prevents it).

    ``differs`` names why LangGraph's reader may read this checkpoint
    differently (``"stored_none"`` or ``"fork_input"``, inherited by seedless
    descendants), else ``None``.
    """

    checkpoint_id: str
    messages: list[Any] | None
    from_seed: bool
    differs: str | None = None


def stored_seed(stored: Any) -> tuple[bool, Any, bool]:
    """``(is_seed, value, was_overwrite_wrapper)`` for a stored channel value.

    ``None`` (absent, or a stored ``None``) is no seed; a ``_DeltaSnapshot`` is
    unwrapped (one holding ``None`` seeds ``[]``); an ``Overwrite`` wrapper in
    any of LangGraph's forms is unwrapped and reported.
    """
    if stored is None:
        return False, None, False
    if isinstance(stored, _DeltaSnapshot):
        stored = stored.value
        if stored is None:  # DeltaChannel.replay_writes folds onto None as onto []
            return True, [], False
    is_ow, ow_value = _get_overwrite(stored)
    if is_ow:
        return True, list(ow_value or []), True
    return True, stored, False


def replay(base: list[Any], values: list[Any]) -> list[Any]:
    """Apply write values as ``DeltaChannel.replay_writes`` does: reset at the last ``Overwrite``, fold the rest.

    Raises:
        ValueError: from :func:`merge_message_writes` (unknown-id ``RemoveMessage``).
    """
    if not values:
        return base
    start = 0
    for i, value in enumerate(values):
        is_ow, ow_value = _get_overwrite(value)
        if is_ow:
            base = copy.copy(ow_value) if ow_value is not None else []
            start = i + 1
    remaining = values[start:]
    if not remaining:
        return list(base)
    appended = _appended(base, remaining)
    return appended if appended is not None else merge_message_writes(base, remaining)


_NOT_PLAIN = (BaseMessageChunk, RemoveMessage)


def _plain_types(messages: list[Any]) -> bool:
    return all(issubclass(t, BaseMessage) and not issubclass(t, _NOT_PLAIN) for t in {type(m) for m in messages})


#: Per thread, ``id(list) -> (list, len, ids or None)`` of the last few values :func:`_appended` returned
#: (or read as bases): the next step of a conversation extends one of them, so its id set is the base's plus
#: the new ids (one C-level set copy) instead of a Python-level pass over the whole list. ``ids`` is ``None``
#: when the list is not all plain messages with ids. Bounded; the walk never mutates a value.
_RECENT = threading.local()
_RECENT_MAX = 8


def _recent() -> dict[int, tuple[list[Any], int, frozenset[str] | None]]:
    cache = getattr(_RECENT, "cache", None)
    if cache is None:
        cache = _RECENT.cache = {}
    return cache


def _base_ids(base: list[Any]) -> frozenset[str] | None:
    cache = _recent()
    hit = cache.get(id(base))
    if hit is not None and hit[0] is base and hit[1] == len(base):
        return hit[2]
    n = len(base)
    for value, length, ids in list(cache.values()):
        # an equal list (e.g. the same stored list decoded again, the same objects): equal messages, equal ids
        if n and length == n == len(value) and value[-1] is base[-1] and value == base:
            _remember(base, ids)
            return ids
    ids = None
    if _plain_types(base):
        ids = frozenset(m.id for m in base)
        if None in ids or "" in ids:
            ids = None
    _remember(base, ids)
    return ids


def _remember(value: list[Any], ids: frozenset[str] | None) -> None:
    cache = _recent()
    if len(cache) >= _RECENT_MAX:
        cache.pop(next(iter(cache)))
    cache[id(value)] = (value, len(value), ids)


def _appended(base: list[Any], values: list[Any]) -> list[Any] | None:
    """``base + new messages`` when the writes only append messages with new ids, else ``None``.

    That is what :func:`merge_message_writes` returns in that case (every
    message already a plain message with an id, none removed, none replacing
    another): the common step of a conversation, done with set operations
    instead of rebuilding the reducer's id index in Python. The id set of
    ``base`` comes from :data:`_BASE_IDS` when ``base`` is a recent result (:data:`_RECENT`), so
    a step costs O(new messages) plus one set copy, not a Python-level pass over the list.
    """
    new: list[Any] = []
    for value in values:
        new.extend(value if isinstance(value, list) else [value])
    if not new or not _plain_types(new):
        return None
    ids = frozenset(m.id for m in new)
    if len(ids) != len(new) or None in ids or "" in ids:
        return None
    base_ids = _base_ids(base)
    if base_ids is None or not ids.isdisjoint(base_ids):
        return None
    out = base + new
    _remember(out, base_ids | ids)
    return out


def _order_unknown(node: CheckpointNode) -> bool:
    tasks = {task_id for task_id, _value, path in node.writes if not path}
    return len(tasks) > 1


def materialize_namespace(nodes: Iterable[CheckpointNode]) -> Iterator[Materialized | Finding]:
    """Walk one namespace's checkpoint tree once, yielding values and findings.

    Args:
        nodes: every checkpoint of one ``(thread_id, checkpoint_ns)``, any order.

    Yields:
        :class:`Materialized` for every reachable checkpoint (parents before
        children; ``messages`` is ``None`` where a blocking finding makes the
        value unknowable) and :class:`Finding` objects as they are discovered.
        A value is dropped as soon as every child has used it, so memory holds
        the values of open branch points only.
    """
    by_id = {n.checkpoint_id: n for n in nodes}
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for node in by_id.values():
        if node.parent_id is None:
            roots.append(node.checkpoint_id)
        elif node.parent_id not in by_id:
            yield Finding("dangling_parent", node.checkpoint_id,
                          f"parent {node.parent_id} is not stored in this namespace", True)
        else:
            children.setdefault(node.parent_id, []).append(node.checkpoint_id)
    for parent, kids in children.items():
        if len(kids) > 1:
            yield Finding("branch_point", parent,
                          f"{len(kids)} children share the writes stored under this checkpoint", False)
        if _order_unknown(by_id[parent]):
            yield Finding("order_unknown", parent,
                          "writes of several tasks without task_path: replay order is by task_id", False)
    stack: list[tuple[str, list[Any] | None, str | None]] = []
    first_root = min(roots) if roots else None
    for root in sorted(roots, reverse=True):
        if root == first_root:
            stack.append((root, [], None))
            continue
        yield Finding("null_parent", root,
                      "no parent_checkpoint_id although older checkpoints exist in this namespace: "
                      "the history before it is unknown", True)
        stack.append((root, None, None))
    visited: set[str] = set()
    while stack:
        cid, inherited, differs = stack.pop()
        visited.add(cid)
        node = by_id[cid]
        is_seed, seed_value, wrapped = stored_seed(node.stored)
        if wrapped:
            yield Finding("overwrite_in_blob", cid, "stored messages value was an Overwrite wrapper", False)
        value: list[Any] | None = inherited
        if isinstance(seed_value, SharedPrefix):
            value = seed_value.resolve()
        elif is_seed and isinstance(seed_value, (list, tuple)):
            value = list(seed_value)
        elif is_seed:
            yield Finding("bad_stored_value", cid,
                          f"stored messages value is a {type(seed_value).__name__}, not a message list"
                          + (" (a Postgres snapshot marker whose blob row is missing)" if seed_value is True else ""),
                          True)
            value = None
        if is_seed:
            differs = None
        elif node.stored_none:
            differs = "stored_none"
            yield Finding("stored_none", cid,
                          "stores messages = None: not a seed, the replay goes on past it; LangGraph's base and "
                          "SQLite readers restart from [] here and read a shorter list (LangGraph #8686)", False)
        yield Materialized(cid, value, is_seed, differs)
        kids = children.get(cid, [])
        if not kids:
            continue
        passed: list[Any] | None = None
        error: Exception | None = None
        if value is not None:
            try:
                passed = replay(value, [v for _task, v, _path in node.writes])
            except Exception as exc:  # noqa: BLE001 - any reducer failure is a finding, not a crash
                error = exc
        consumers = _consumers(node, [by_id[k] for k in kids])
        for kid in sorted(kids, reverse=True):
            child = by_id[kid]
            if node.writes and not stored_seed(child.stored)[0]:
                # classified from the child's own stored data, whatever its siblings: deleting a sibling
                # (retention's safe_only) must not change what the remaining child reads
                if child.source == "input":
                    yield Finding("fork_input", kid,
                                  f"an input checkpoint forked from {cid}, which stores messages writes: it "
                                  "consumed none of them; LangGraph's reader replays them into it (DeerFlow #4458)",
                                  False)
                    stack.append((kid, value, "fork_input"))
                    continue
                if len(kids) > 1 and len(consumers) > 1:
                    yield Finding("branch_ambiguous", kid,
                                  f"branch point {cid} stores the messages writes of {len(consumers)} children "
                                  f"({', '.join(sorted(c.checkpoint_id for c in consumers))}) under its own id and "
                                  "nothing stored tells which child consumed which write (LangGraph #8443)", True)
            if value is not None and not stored_seed(child.stored)[0]:
                if error is not None:
                    yield Finding("reducer_error", kid,
                                  f"replaying the writes stored under parent {cid} failed: "
                                  f"{type(error).__name__}: {error}", True)
                elif (not node.writes and child.version is not None and child.version != node.version):
                    yield Finding("missing_writes", kid,
                                  f"messages version changed from {node.version!r} to {child.version!r} "
                                  f"but parent {cid} stores no messages write", True)
                    stack.append((kid, None, None))
                    continue
            stack.append((kid, passed, differs))
    for cid in by_id:
        if cid not in visited and by_id[cid].parent_id in by_id:
            yield _unreachable(cid, by_id)


def _consumers(node: CheckpointNode, kids: list[CheckpointNode]) -> list[CheckpointNode]:
    """The seedless children that may have consumed ``node``'s writes: every source but ``input``."""
    return [k for k in kids if k.source != "input" and not stored_seed(k.stored)[0]]


def _unreachable(cid: str, by_id: dict[str, CheckpointNode]) -> Finding:
    seen = {cid}
    parent = by_id[cid].parent_id
    while parent is not None and parent in by_id:
        if parent in seen:
            return Finding("cycle", cid, "parent_checkpoint_id links form a cycle above this checkpoint", True)
        seen.add(parent)
        parent = by_id[parent].parent_id
    return Finding("dangling_parent", cid,
                   f"an ancestor's parent {parent} is not stored in this namespace", True)
