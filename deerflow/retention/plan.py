"""Retention plans: which checkpoints of one thread a rule keeps, deletes and protects, and why.

Pure functions over the thread's checkpoint tree (no database). The rules
follow DeerFlow's checkpoint retention contract: its protected set (the
latest resumable state, explicit resume targets, the ancestor chain a kept
checkpoint reads through, pending writes) and its two provably safe shapes
(trailing duration-only leaves, leaf sibling branches).

* :func:`plan_keep_last` -- per namespace the head and its ``n - 1`` nearest
  ancestors on the head's parent chain, plus every protected checkpoint
  (kept on its own); a subgraph call's namespace (``:`` in it) goes with the
  root-graph checkpoint it started from (``metadata.parents[""]``).
* :func:`plan_safe_only` -- only trailing duration-only leaves and leaf
  sibling branches; never the head chain, never an ancestor of a kept one.

A kept checkpoint whose parent is deleted is a *chain start*: its parent
link is cleared and, when its value lives in its ancestors (a delta
checkpoint storing no seed), it is rebased (:mod:`deerflow.retention.rebase`)
with LangGraph's reading of it. Rebasing is exact only where LangGraph's
reading of every kept descendant is that reading plus the writes below it;
where the replay rule and LangGraph's reader disagree (``Node.differs``: an
``input`` fork child of a checkpoint holding another turn's writes, or a
stored ``None`` the savers read differently), :func:`plan_keep_last` instead
keeps the chain the reading goes through, up to the stored seed (reason
``reader_disagreement``), so nothing a reader of either saver reads changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["DURATION_KEY", "Forest", "Node", "Plan", "REASONS", "is_duration_only", "plan_keep_last",
           "plan_safe_only"]

_Key = tuple[str, str]  # (checkpoint_ns, checkpoint_id)

REASONS = ("head", "resume_target", "pending_writes", "chain_to_seed", "reader_disagreement")
"""Why a checkpoint is protected: the namespace head (the latest resumable state), an explicit resume target
(``--protect``), pending writes (a leaf owning writes rows: in-flight state), the ancestor chain a kept
checkpoint reads through (``safe_only``), or the chain a kept checkpoint's reading goes through where the replay
rule and LangGraph's reader disagree (``keep_last``: a rebase could not keep LangGraph's reading below it)."""

DURATION_KEY = "runtime_run_duration"


class Node(NamedTuple):
    """One stored checkpoint, as a plan needs it (a named tuple: a batch builds one per checkpoint of its threads).

    Attributes:
        ns: ``checkpoint_ns`` (``""`` for the root graph).
        checkpoint_id: the id.
        parent_id: ``parent_checkpoint_id`` (``None`` for a root).
        metadata: the stored metadata (``parents``, ``source``, ``writes`` ...).
        versions: ``checkpoint["channel_versions"]``.
        owns_writes: True when writes rows are stored under this checkpoint.
        seed: True when it stores its ``messages`` value (a list, a ``_DeltaSnapshot``; a stored ``None`` is
            none): a reading of it or below it starts here.
        differs: why the replay rule and LangGraph's reader read it differently (``"fork_input"``,
            ``"stored_none"``; :attr:`deerflow.convert.onepass.Materialized.differs`), else ``None``.
    """

    ns: str
    checkpoint_id: str
    parent_id: str | None
    metadata: Mapping[str, Any]
    versions: Mapping[str, Any]
    owns_writes: bool
    seed: bool = True
    differs: str | None = None

    @property
    def key(self) -> _Key:
        return (self.ns, self.checkpoint_id)


@dataclass
class Plan:
    """What a rule does to one thread.

    Attributes:
        kept, deleted: checkpoint keys ``(checkpoint_ns, checkpoint_id)``.
        protected: ``{key: reason}`` (a reason from :data:`REASONS`) for kept checkpoints the rule must keep.
        chain_starts: kept checkpoints whose parent is deleted (their parent link is cleared).
        deleted_namespaces: subgraph namespaces deleted whole with their root-graph checkpoint.
        unbranchable: deleted checkpoints on a head's parent chain: older turns that can no longer be
            resumed or forked from.
    """

    kept: set[_Key] = field(default_factory=set)
    deleted: set[_Key] = field(default_factory=set)
    protected: dict[_Key, str] = field(default_factory=dict)
    chain_starts: set[_Key] = field(default_factory=set)
    deleted_namespaces: set[str] = field(default_factory=set)
    unbranchable: set[_Key] = field(default_factory=set)


class Forest(NamedTuple):
    """A thread's checkpoints as the keep-last rule reads them: parent links by namespace and sparse facts.

    Cheap to build from columns (:func:`deerflow.retention.batchfacts.read_batch_forests` builds it with no
    :class:`Node`); :meth:`of` builds it from nodes.

    Attributes:
        parents: ``{checkpoint_ns: {checkpoint_id: parent_checkpoint_id or None}}``.
        owners: keys of the checkpoints writes rows are stored under (the rule asks it of leaves only).
        call_roots: ``{key: metadata["parents"]}`` of the checkpoints of subgraph-call namespaces (``:`` in
            the name); absent: no ``parents``.
        differs: ``{key: Node.differs}`` where it is set.
        unseeded: keys of the checkpoints that store no seed (``Node.seed`` false).
    """

    parents: dict[str, dict[str, str | None]]
    owners: set[_Key]
    call_roots: dict[_Key, Any]
    differs: dict[_Key, str]
    unseeded: set[_Key]

    @classmethod
    def of_columns(cls, namespaces: list[str], ids: list[str], parents: list[str | None],
                   call_roots: dict[_Key, Any]) -> Forest:
        """The forest of one thread's columns (parallel lists, one entry per checkpoint) with no differs, every
        checkpoint a seed and ``owners`` empty (the caller fills it)."""
        by_ns: dict[str, dict[str, str | None]]
        if len(set(namespaces)) == 1:
            by_ns = {namespaces[0]: dict(zip(ids, parents, strict=True))}
        else:
            by_ns = {}
            for ns, cid, parent in zip(namespaces, ids, parents, strict=True):
                by_ns.setdefault(ns, {})[cid] = parent
        return cls(by_ns, set(), call_roots, {}, set())

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> Forest:
        """The forest of ``nodes`` (every checkpoint of the thread)."""
        forest = cls({}, set(), {}, {}, set())
        for node in nodes:
            key = (node.ns, node.checkpoint_id)
            forest.parents.setdefault(node.ns, {})[node.checkpoint_id] = node.parent_id
            if node.owns_writes:
                forest.owners.add(key)
            if ":" in node.ns:
                forest.call_roots[key] = node.metadata.get("parents")
            if node.differs is not None:
                forest.differs[key] = node.differs
            if not node.seed:
                forest.unseeded.add(key)
        return forest


def _by_ns(nodes: Iterable[Node]) -> dict[str, dict[str, Node]]:
    out: dict[str, dict[str, Node]] = {}
    for node in nodes:
        out.setdefault(node.ns, {})[node.checkpoint_id] = node
    return out


def _children(tree: Mapping[str, Node]) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for node in tree.values():
        if node.parent_id is not None and node.parent_id in tree:
            kids.setdefault(node.parent_id, []).append(node.checkpoint_id)
    return kids


def _chain(parents: Mapping[str, str | None], start: str, limit: int | None = None) -> list[str]:
    """``start`` and its ancestors, nearest first (stops at a missing parent or a cycle, or after ``limit``)."""
    out: list[str] = []
    seen: set[str] = set()
    cid: str | None = start
    while cid is not None and cid in parents and cid not in seen and (limit is None or len(out) < limit):
        out.append(cid)
        seen.add(cid)
        cid = parents[cid]
    return out


def _protect(plan: Plan, ns: str, ids: Set[str], leaves: Iterable[str], head: str, protect: set[str],
             owners: Set[_Key]) -> None:
    """Mark the head, the ``protect`` ids among ``ids`` and the ``leaves`` that own writes rows (first reason
    wins)."""
    plan.protected[(ns, head)] = "head"
    for cid in protect & ids:
        plan.protected.setdefault((ns, cid), "resume_target")
    for cid in leaves:
        if (ns, cid) in owners:
            plan.protected.setdefault((ns, cid), "pending_writes")


def _finish(plan: Plan, parents: Mapping[str, Mapping[str, str | None]], heads: Mapping[str, str]) -> Plan:
    """Add the chain starts (kept, parent deleted) and the unbranchable checkpoints (deleted, on a head's chain)."""
    for ns, cid in plan.kept:
        parent = parents[ns][cid]
        if parent is not None and (ns, parent) in plan.deleted:
            plan.chain_starts.add((ns, cid))
    for ns, tree in parents.items():
        plan.unbranchable.update((ns, cid) for cid in _chain(tree, heads[ns]) if (ns, cid) in plan.deleted)
    return plan


def _heads(trees: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """``{checkpoint_ns: head id}``."""
    return {ns: max(tree) for ns, tree in trees.items()}  # LangGraph's latest: the largest id


def plan_keep_last(nodes: Iterable[Node] | Forest, n: int, protect: Iterable[str] = ()) -> Plan:
    """Keep the head and its ``n - 1`` nearest ancestors per namespace, plus the protected set.

    Args:
        nodes: every checkpoint of the thread (all namespaces), or their :class:`Forest`.
        n: checkpoints to keep on each head's chain (count, >= 1).
        protect: checkpoint ids to keep (explicit resume targets), in any namespace.

    Returns:
        A :class:`Plan`. A subgraph call's namespace (``:`` in its name) whose
        head's ``metadata.parents[""]`` names a deleted root-graph checkpoint is
        deleted whole, unless it holds a protected id.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"keep_last needs n >= 1 (the head is always kept), got {n}")
    forest = nodes if isinstance(nodes, Forest) else Forest.of(nodes)
    protect = set(protect)
    heads = _heads(forest.parents)
    plan = Plan()
    for ns in sorted(forest.parents, key=lambda x: (x != "", x)):
        tree = forest.parents[ns]
        if ns and ":" in ns and not (protect & tree.keys()):
            root = (forest.call_roots.get((ns, heads[ns])) or {}).get("")
            if root is not None and ("", root) in plan.deleted:
                plan.deleted |= {(ns, cid) for cid in tree}
                plan.deleted_namespaces.add(ns)
                continue
        _protect(plan, ns, tree.keys(), tree.keys() - set(tree.values()), heads[ns], protect, forest.owners)
        keep = set(_chain(tree, heads[ns], n)) | {cid for (pns, cid) in plan.protected if pns == ns}
        _keep_reading_chains(plan, ns, forest, keep)
        plan.kept.update((ns, cid) for cid in keep & tree.keys())
        plan.deleted.update((ns, cid) for cid in tree.keys() - keep)
    return _finish(plan, forest.parents, heads)


def _keep_reading_chains(plan: Plan, ns: str, forest: Forest, keep: set[str]) -> None:
    """Add to ``keep`` the chain above every kept checkpoint of ``ns`` whose reading the readers disagree on.

    A kept checkpoint with ``differs`` whose parent would go is read, by LangGraph's reader, through
    ancestors a rebase cannot stand for (a rebase stores one value, and the savers' readings of the
    chain below are not that value plus the writes). Its ancestors up to and including the stored seed
    are kept, protected with reason ``reader_disagreement``; the seed then starts the kept chain.
    """
    tree = forest.parents[ns]
    for cid in sorted(keep):
        if (ns, cid) not in forest.differs:
            continue
        link = tree[cid]
        while link is not None and link in tree and link not in keep:
            keep.add(link)
            if (ns, link) not in plan.protected:
                plan.protected[(ns, link)] = "reader_disagreement"
            if (ns, link) not in forest.unseeded:
                break
            link = tree[link]


def is_duration_only(node: Node, parent: Node | None) -> bool:
    """True when ``node`` is one of DeerFlow's run-duration stamps on ``parent``.

    DeerFlow's ``persist_run_durations`` appends a clone of the parent's
    values whose metadata ``writes`` holds only ``runtime_run_duration``. The
    Postgres savers drop metadata ``writes``, so there (no ``writes`` key) it
    is recognised as DeerFlow does: ``source == "update"``, DeerFlow's
    run-history stamp (``runtime_run_duration``) in the metadata, and channel
    versions identical to the parent's.
    """
    if parent is None or node.versions != parent.versions:
        return False
    writes = node.metadata.get("writes")
    if isinstance(writes, Mapping) and writes:
        return all(isinstance(v, Mapping) and set(v) == {DURATION_KEY} for v in writes.values()) or \
            set(writes) == {DURATION_KEY}
    return node.metadata.get("source") == "update" and DURATION_KEY in node.metadata


def plan_safe_only(nodes: Iterable[Node], protect: Iterable[str] = ()) -> Plan:
    """Delete only what DeerFlow's contract proves safe: trailing duration-only leaves and leaf sibling branches.

    A trailing duration-only leaf is a duration-only checkpoint
    (:func:`is_duration_only`) with no children that is not protected. A leaf
    sibling branch is a line of checkpoints off a head's chain, each with
    exactly one child except its last (a leaf), none protected, none on a
    kept checkpoint's ancestor chain. The head chain is never touched.

    Args:
        nodes: every checkpoint of the thread (all namespaces).
        protect: checkpoint ids to keep (explicit resume targets).

    Returns:
        A :class:`Plan`; ancestors of kept checkpoints are marked ``chain_to_seed`` when deleting them
        would have been possible otherwise.
    """
    protect = set(protect)
    nodes = list(nodes)
    trees = _by_ns(nodes)
    forest = Forest.of(nodes)
    heads = _heads(trees)
    plan = Plan()
    for ns, tree in trees.items():
        parents = forest.parents[ns]
        kids = _children(tree)
        doomed: set[str] = set()
        head = heads[ns]
        while _deletable_duration_leaf(tree, head, kids, doomed, protect):
            doomed.add(head)  # a trailing duration-only head: its parent (same values) becomes the head
            head = tree[head].parent_id  # type: ignore[assignment]
        heads[ns] = head
        _protect(plan, ns, tree.keys(), [c for c in tree if not any(k not in doomed for k in kids.get(c, []))], head,
                 protect, forest.owners)
        head_chain = set(_chain(parents, head))
        for cid in tree:
            if cid in doomed or kids.get(cid) or (ns, cid) in plan.protected:
                continue
            if cid not in head_chain and _deletable_duration_leaf(tree, cid, kids, doomed, protect):
                doomed.add(cid)
                continue
            line = _chain(parents, cid)
            branch: list[str] = []
            for link in line:
                if link in head_chain or (ns, link) in plan.protected or len(kids.get(link, [])) > 1:
                    break
                branch.append(link)
            if branch and len(branch) < len(line):  # it joins a kept line: a sibling branch, not a root line
                doomed |= set(branch)
        for cid in tree:
            (plan.deleted if cid in doomed else plan.kept).add((ns, cid))
        for cid in tree:
            if (ns, cid) in plan.kept and (ns, cid) not in plan.protected:
                if any((ns, k) in plan.kept for k in kids.get(cid, [])):
                    plan.protected[(ns, cid)] = "chain_to_seed"
    return _finish(plan, forest.parents, heads)


def _deletable_duration_leaf(tree: Mapping[str, Node], cid: str, kids: Mapping[str, list[str]], doomed: set[str],
                             protect: set[str]) -> bool:
    node = tree[cid]
    live_kids = [k for k in kids.get(cid, []) if k not in doomed]
    parent = tree.get(node.parent_id) if node.parent_id else None
    return (not live_kids and cid not in protect and not node.owns_writes and parent is not None
            and is_duration_only(node, parent))
