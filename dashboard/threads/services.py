"""Thread browsing services shared by the HTML views and the JSON API.

Each function takes the process runtime, checks config drift first (503),
and reads through :class:`CheckpointStateAccessor` (materialized values) or
:mod:`deerflow.inventory` (metadata only). In full mode a checkpoint whose
lineage carries delta evidence is refused with the spec's 409 even where the
spec's head-only gate would let it through (issue 3, item 6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langgraph.types import StateSnapshot

from dashboard.runtime import DashboardRuntime
from dashboard.threads import storage
from deerflow import inventory, namespaces
from deerflow._langgraph_compat import _DeltaSnapshot, _get_overwrite
from deerflow.agents.thread_state import get_thread_state_schema
from deerflow.errors import (
    MISMATCH_MESSAGE,
    BranchAmbiguousError,
    CheckpointModeMismatchError,
    CheckpointNotFoundError,
    IncompleteHistoryError,
    ReducerError,
    ThreadNotFoundError,
)
from deerflow.history_values import derive_messages
from deerflow.lineage import ReplayChain, branch_points, replay_chain, replay_chains
from deerflow.prefetch import reuse_tuple
from deerflow.readercompare import REASONS, needs_comparison, replay_reading
from deerflow.replaycheck import find_reducer_failure
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_DELTA,
    CHECKPOINT_MODE_METADATA_KEY,
    COUNTERS_METADATA_KEY,
    INTERNAL_CHECKPOINT_MODE_KEY,
    checkpoint_metadata_uses_delta,
)
from deerflow.sqlread import has_sql_tables

__all__ = [
    "CheckpointRow",
    "StateView",
    "list_threads",
    "messages_stored",
    "pending_nodes",
    "read_history",
    "read_state",
    "thread_summary",
    "unknown_channels",
]


@dataclass(frozen=True)
class StateView:
    """A materialized checkpoint as the pages and the API show it.

    Attributes:
        thread_id, checkpoint_id, checkpoint_ns, parent_checkpoint_id: addressing.
        created_at: the checkpoint's ``ts`` (ISO 8601) or ``None``.
        metadata: stored metadata (the internal routing key never appears).
        values: materialized channel values; ``values["messages"]`` holds message objects.
        next: nodes scheduled next (tuple of names).
        findings: what the stored data says that a plain reading would hide, each
            ``{"kind", "channel", "detail"}``; ``kind`` ``overwrite_in_blob``: the
            channel's stored value was an ``Overwrite`` wrapper (any of LangGraph's
            three forms); ``values`` holds its payload; ``reader_disagreement``: LangGraph's
            reader reads this checkpoint's ``messages`` differently from the replay rule
            shown (also ``reason`` (a :data:`deerflow.readercompare.REASONS` key),
            ``message_count``, ``langgraph_message_count``).
        pending_writes: the raw tuple's ``pending_writes`` as the saver returned them
            (``[(task_id, channel, value)]``; what :func:`dashboard.threads.writes.pending_writes`
            shows without reading the checkpoint again), or ``None`` when not read.
    """

    thread_id: str
    checkpoint_id: str
    checkpoint_ns: str
    parent_checkpoint_id: str | None
    created_at: str | None
    metadata: dict[str, Any]
    values: dict[str, Any]
    next: tuple[str, ...]
    findings: tuple[dict[str, Any], ...] = ()
    pending_writes: list[tuple[str, str, Any]] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class CheckpointRow:
    """One history row: storage facts plus the materialized message count.

    ``message_count`` is ``None`` when the checkpoint's messages cannot be
    reconstructed; ``problem`` then says why, with the error code its state
    read answers: ``history_incomplete`` (a delta replay chain with a missing
    link: see :mod:`deerflow.lineage`), ``reducer_error`` (a stored write
    the reducer refuses: see :mod:`deerflow.replaycheck`) or
    ``branch_ambiguous`` (sibling forks' writes: see :mod:`deerflow.readercompare`).
    ``disagreement`` (a :data:`deerflow.readercompare.REASONS` key) and
    ``langgraph_message_count`` are set where LangGraph's reader counts
    differently from ``message_count`` (the replay rule's).
    """

    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint_ns: str
    step: int | None
    source: str | None
    created_at: str | None
    mode: str
    messages_stored: str
    message_count: int | None
    problem: str | None = None
    disagreement: str | None = None
    langgraph_message_count: int | None = None


def _config(thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def messages_stored(channel_values: dict[str, Any]) -> str:
    """What a raw saver tuple holds for ``messages``: ``plain``, ``delta_snapshot`` or ``absent``."""
    if "messages" not in channel_values or channel_values["messages"] is None:
        return "absent"
    if isinstance(channel_values["messages"], _DeltaSnapshot):
        return "delta_snapshot"
    return "plain"


def pending_nodes(checkpoint: dict[str, Any]) -> tuple[str, ...]:
    """The nodes a resumed run would execute next, read from the raw checkpoint alone.

    The dashboard's accessor graph is a one-node state-mutation graph, not the
    agent graph that wrote the thread, so ``StateSnapshot.next`` computed
    against it is always empty. LangGraph triggers a node when one of its
    trigger channels (``__start__`` for the input node, ``branch:to:<node>``
    for every other node) holds a value, was updated by the last step
    (``updated_channels``; every channel when that is ``None``, as after
    ``update_state``), and has a newer version than the node has seen. Nodes
    scheduled with ``Send`` are read from the ``__pregel_tasks`` channel.

    Returns:
        Node names, sorted.
    """
    values = checkpoint.get("channel_values") or {}
    versions = checkpoint.get("channel_versions") or {}
    seen = checkpoint.get("versions_seen") or {}
    updated = checkpoint.get("updated_channels")
    nodes: set[str] = set()
    for channel, version in versions.items():
        if (updated is not None and channel not in updated) or channel not in values:
            continue
        if channel == "__start__":
            node = "__start__"
        elif channel.startswith("branch:to:"):
            node = channel[len("branch:to:"):]
        elif channel == "__pregel_tasks":
            nodes.update(str(getattr(send, "node", send)) for send in values[channel] or [])
            continue
        else:
            continue
        node_seen = (seen.get(node) or {}).get(channel)
        if node_seen is None or node_seen < version:
            nodes.add(node)
    return tuple(sorted(nodes))


def unknown_channels(rt: DashboardRuntime, checkpoint: dict[str, Any]) -> dict[str, Any]:
    """Stored channels that DeerFlow's state schema does not declare (added by middleware), as stored.

    The accessor materializes through DeerFlow's schema, which would silently
    leave them out; they are shown raw instead, never dropped. LangGraph's
    internal channels (``__start__``, ``branch:to:<node>``, ...) are not state.
    """
    schema = get_thread_state_schema(rt.mode, rt.snapshot_frequency)
    known = set(schema.__required_keys__) | set(schema.__optional_keys__)
    return {name: value for name, value in (checkpoint.get("channel_values") or {}).items()
            if name not in known and not name.startswith("__") and ":" not in name}


def _clean_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (metadata or {}).items() if k != INTERNAL_CHECKPOINT_MODE_KEY}


def _lineage_is_delta(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> bool:
    if has_sql_tables(rt.saver):
        return inventory.lineage_has_delta_evidence(rt.saver, thread_id, checkpoint_ns, checkpoint_id)
    # No SQL tables (memory saver): walk the parent chain through the saver.
    config: dict[str, Any] | None = _config(thread_id, checkpoint_ns, checkpoint_id)
    seen: set[str] = set()
    while config is not None:
        tup = rt.saver.get_tuple(config)
        if tup is None or tup.config["configurable"]["checkpoint_id"] in seen:
            return False
        if checkpoint_metadata_uses_delta(tup.metadata):
            return True
        seen.add(tup.config["configurable"]["checkpoint_id"])
        config = tup.parent_config
    return False


def _raw_tuple(rt: DashboardRuntime, thread_id: str, checkpoint_id: str | None, checkpoint_ns: str) -> Any:
    tup = rt.saver.get_tuple(_config(thread_id, checkpoint_ns, checkpoint_id))
    if tup is not None:
        return tup
    if not _thread_exists(rt, thread_id):
        raise _not_found(rt, thread_id)
    raise CheckpointNotFoundError(thread_id, checkpoint_id, checkpoint_ns)


def _not_found(rt: DashboardRuntime, thread_id: str) -> ThreadNotFoundError:
    """The 404 of a thread without checkpoints, its summary row (if the list still shows it) removed first."""
    storage.forget_vanished(rt, thread_id)
    return ThreadNotFoundError(thread_id)


def _thread_exists(rt: DashboardRuntime, thread_id: str) -> bool:
    if has_sql_tables(rt.saver):
        return inventory.get_thread_summary(rt.saver, thread_id) is not None
    return rt.saver.get_tuple(_config(thread_id)) is not None


def _replay_chain(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> ReplayChain:
    """Delta mode: the checkpoint's replay walk and its break, if any (full mode replays nothing)."""
    if rt.mode != CHECKPOINT_MODE_DELTA:
        return ReplayChain(None, (), frozenset())
    return replay_chain(rt.saver, thread_id, checkpoint_ns, checkpoint_id)


def _replay_chains(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str,
                   tuples: list[Any]) -> dict[str, ReplayChain]:
    """:func:`_replay_chain` of every tuple of a history page (one query on Postgres), by checkpoint id."""
    ids = [t.config["configurable"]["checkpoint_id"] for t in tuples]
    if rt.mode != CHECKPOINT_MODE_DELTA:
        return {cid: ReplayChain(None, (), frozenset()) for cid in ids}
    return replay_chains(rt.saver, thread_id, checkpoint_ns, ids)


class _Branches:
    """The namespace's branch points, queried once per request and only when a replay chain is longer than one."""

    def __init__(self, rt: DashboardRuntime, thread_id: str, checkpoint_ns: str):
        self.rt, self.thread_id, self.ns, self._found = rt, thread_id, checkpoint_ns, None

    def get(self) -> frozenset[str]:
        if self._found is None:
            self._found = branch_points(self.rt.saver, self.thread_id, self.ns)
        return self._found


def _replay_rule(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str, chain: ReplayChain,
                 branches: _Branches, theirs: Any) -> tuple[list[Any], dict[str, Any]] | None:
    """Where the shape allows LangGraph's reader (``theirs``) to differ from the replay rule: the rule's value.

    Returns:
        ``None`` when the shape rules a difference out or both agree; else ``(messages, finding)``
        with a ``reader_disagreement`` finding giving both counts and the reason.

    Raises:
        BranchAmbiguousError: the walk passes sibling forks whose writes nothing stored attributes.
    """
    if len(chain.checkpoint_ids) < 2 or not needs_comparison(chain, branches.get()):
        return None
    reading = replay_reading(rt.saver, thread_id, checkpoint_ns, chain, branches.get())
    cid = chain.checkpoint_ids[0]
    if reading is None:
        return None
    if reading.ambiguous is not None:
        point = reading.branch_point or "?"
        raise BranchAmbiguousError(thread_id, cid, checkpoint_ns, branch_point=point,
                                   reason=reading.ambiguous.detail.removeprefix(f"branch point {point} "))
    ours = reading.messages
    theirs = theirs if isinstance(theirs, list) else []
    if ours is None or ours == theirs:
        return None
    reason = REASONS.get(reading.differs or "", "the replay rule and LangGraph's reader replay different writes")
    return ours, {"kind": "reader_disagreement", "channel": "messages", "reason": reading.differs,
                  "message_count": len(ours), "langgraph_message_count": len(theirs),
                  "detail": f"LangGraph's reader reads {len(theirs)} messages at this checkpoint, the replay rule "
                            f"{len(ours)} (shown): {reason}"}


def _gate_lineage(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> None:
    if rt.mode != CHECKPOINT_MODE_DELTA and _lineage_is_delta(rt, thread_id, checkpoint_ns, checkpoint_id):
        raise CheckpointModeMismatchError(MISMATCH_MESSAGE, thread_id=thread_id)


def _materialize(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str, checkpoint_id: str,
                 tup: Any = None) -> StateSnapshot:
    """The accessor's snapshot; a write the ``messages`` reducer refuses becomes :class:`ReducerError` (422).

    Args:
        tup: the raw tuple already fetched for ``checkpoint_id`` (reused), or ``None``.

    Raises:
        ReducerError: the replay raised ``ValueError``; names the write and the missing id.
    """
    config = _config(thread_id, checkpoint_ns, checkpoint_id)
    try:
        return rt.accessor.get(reuse_tuple(config, rt.saver, tup) if tup is not None else config)
    except ValueError as exc:
        if isinstance(exc, ReducerError):
            raise
        failure = find_reducer_failure(rt.saver, thread_id, checkpoint_ns, checkpoint_id)
        if failure is None:
            raise ReducerError(thread_id, checkpoint_id, checkpoint_ns,
                               reason=f"replaying its stored writes failed ({exc})") from exc
        raise ReducerError(thread_id, checkpoint_id, checkpoint_ns, reason=failure.describe(),
                           write_checkpoint_id=failure.write_checkpoint_id, task_id=failure.task_id,
                           missing_ids=failure.missing_ids) from exc


def _unwrap_overwrites(values: dict[str, Any]) -> tuple[dict[str, str], ...]:
    """Replace, in place, every channel value that is an ``Overwrite`` wrapper by its payload; one finding each.

    LangGraph stores the first value a default-less reducer channel receives
    verbatim, an ``Overwrite`` included (DeerFlow #4380, LangGraph #9017), and
    a JSON round trip turns one into ``{"value": ..., "type": "__overwrite__"}``
    or ``{"__overwrite__": ...}``; LangGraph's ``_get_overwrite`` reads all three.
    """
    found = []
    for name in sorted(values):
        is_overwrite, payload = _get_overwrite(values[name])
        if is_overwrite:
            values[name] = payload
            found.append({"kind": "overwrite_in_blob", "channel": name,
                          "detail": f"the stored value of channel {name!r} is an Overwrite wrapper "
                                    f"({type(values[name]).__name__} payload shown); LangGraph applies it as "
                                    "a replacement of the channel's value"})
    return tuple(found)


def read_state(rt: DashboardRuntime, thread_id: str, checkpoint_id: str | None = None, checkpoint_ns: str = "") -> StateView:
    """Materialize one checkpoint (the namespace head when ``checkpoint_id`` is None).

    Raises:
        CheckpointModeReconfigurationError: config.yaml drifted (503).
        CheckpointModeMismatchError: full mode and the checkpoint or its lineage is delta (409).
        ThreadNotFoundError / CheckpointNotFoundError: nothing stored there (404).
        IncompleteHistoryError: delta mode and the replay chain is broken (422).
        ReducerError: a stored write on the way is refused by the messages reducer (422).
        BranchAmbiguousError: the replay walk passes sibling forks whose writes nothing stored
            attributes to one child (422).
    """
    rt.check_drift()
    tup = _raw_tuple(rt, thread_id, checkpoint_id, checkpoint_ns)
    resolved_id = tup.config["configurable"]["checkpoint_id"]
    _gate_lineage(rt, thread_id, checkpoint_ns, resolved_id)
    chain = _replay_chain(rt, thread_id, checkpoint_ns, resolved_id)
    if chain.gap is not None:  # never show the messages after a break as the whole conversation
        raise IncompleteHistoryError(thread_id, resolved_id, checkpoint_ns, reason=chain.gap.describe())
    # Materialize the checkpoint that was gated, even if a newer head appeared meanwhile.
    # ... from the tuple already fetched above (LangGraph would fetch it, blobs and all, a second time).
    snapshot: StateSnapshot = _materialize(rt, thread_id, checkpoint_ns, resolved_id, tup)
    values = dict(snapshot.values or {})
    values.update(unknown_channels(rt, tup.checkpoint))
    findings = _unwrap_overwrites(values)
    rule = _replay_rule(rt, thread_id, checkpoint_ns, chain, _Branches(rt, thread_id, checkpoint_ns),
                        values.get("messages"))
    if rule is not None:  # never present LangGraph's reading as the truth where the replay rule differs
        values["messages"] = rule[0]
        findings = (*findings, rule[1])
    if isinstance(values.get("messages"), _DeltaSnapshot):
        # Old LangGraph readers hand a full-mode process the raw snapshot object.
        raise CheckpointModeMismatchError(MISMATCH_MESSAGE, thread_id=thread_id)
    if "messages" in values and not isinstance(values["messages"], list):
        # e.g. Postgres's inline snapshot marker (True) whose blob row is gone: never render it as messages.
        raise IncompleteHistoryError(thread_id, resolved_id, checkpoint_ns,
                                     reason=f"the stored messages value is a {type(values['messages']).__name__}, "
                                            "not a message list (a snapshot blob is missing)")
    parent = snapshot.parent_config["configurable"]["checkpoint_id"] if snapshot.parent_config else None
    return StateView(
        thread_id=thread_id,
        checkpoint_id=snapshot.config["configurable"]["checkpoint_id"],
        checkpoint_ns=checkpoint_ns,
        parent_checkpoint_id=parent,
        created_at=snapshot.created_at,
        metadata=_clean_metadata(snapshot.metadata),
        values=values,
        next=pending_nodes(tup.checkpoint),
        findings=findings,
        pending_writes=list(tup.pending_writes or []),
    )


def read_history(
    rt: DashboardRuntime,
    thread_id: str,
    *,
    limit: int = 50,
    before: str | None = None,
    checkpoint_ns: str = "",
) -> tuple[list[CheckpointRow], str | None]:
    """One page of a namespace's checkpoints, newest first, materializing only that page.

    Args:
        limit: rows per page (count, 1..500).
        before: a checkpoint id; the page starts just below it.

    Returns:
        ``(rows, next_before)``; ``next_before`` is ``None`` on the last page.

    Raises:
        The same errors as :func:`read_state`; ``CheckpointNotFoundError``
        when ``before`` names no checkpoint of this namespace.
    """
    rt.check_drift()
    if before:  # it must name a checkpoint of this namespace (404 otherwise)
        _raw_tuple(rt, thread_id, before, checkpoint_ns)
    before_config = _config(thread_id, checkpoint_ns, before) if before else None
    tuples = list(rt.saver.list(_config(thread_id, checkpoint_ns), before=before_config, limit=limit + 1))
    page, more = tuples[:limit], len(tuples) > limit
    if not page:  # the thread's 404, or the gate on the checkpoint the empty page starts below
        head = _raw_tuple(rt, thread_id, before, checkpoint_ns)
        _gate_lineage(rt, thread_id, checkpoint_ns, head.config["configurable"]["checkpoint_id"])
    # Oldest first: each row's value and lineage follow from its parent's row when that is on the page
    # (deerflow.history_values); a row that does not follow plainly is read as before.
    delta = rt.mode == CHECKPOINT_MODE_DELTA
    known: dict[str, tuple[Any, list[Any] | None]] = {}  # id -> (tuple, LangGraph's reading of messages)
    rows = []
    branches = _Branches(rt, thread_id, checkpoint_ns)
    chains = _replay_chains(rt, thread_id, checkpoint_ns, page)
    for tup in reversed(page):
        cid = tup.config["configurable"]["checkpoint_id"]
        if not delta:
            _gate_lineage(rt, thread_id, checkpoint_ns, cid)
        parent_id = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        parent_tup, parent_theirs = known.get(parent_id, (None, None)) if parent_id != cid else (None, None)
        chain = chains[cid]
        problem = "history_incomplete" if chain.gap else None
        messages = theirs = None
        disagreement: dict[str, Any] | None = None
        if not chain.gap:
            try:
                # LangGraph's reading: derived from the parent row's reading when it follows plainly
                theirs = derive_messages(tup, parent_tup, parent_theirs, delta=delta)
                if theirs is None:
                    theirs = _materialize(rt, thread_id, checkpoint_ns, cid).values.get("messages") or []
                messages = theirs
                rule = _replay_rule(rt, thread_id, checkpoint_ns, chain, branches, theirs)
                if rule is not None:  # shown: the replay rule's value, flagged
                    messages, disagreement = rule
            except ReducerError:  # this row cannot be read; the rows before the bad write still are
                problem = "reducer_error"
            except BranchAmbiguousError:
                problem = "branch_ambiguous"
        known[cid] = (tup, theirs if isinstance(theirs, list) and problem is None else None)
        metadata = tup.metadata or {}
        rows.append(CheckpointRow(
            checkpoint_id=cid,
            parent_checkpoint_id=parent_id,
            checkpoint_ns=checkpoint_ns,
            step=metadata.get("step"),
            source=metadata.get("source"),
            created_at=tup.checkpoint.get("ts"),
            mode="delta" if checkpoint_metadata_uses_delta(metadata) else "full",
            messages_stored=messages_stored(tup.checkpoint.get("channel_values") or {}),
            message_count=None if problem else (len(messages) if isinstance(messages, list) else 0),
            problem=problem,
            disagreement=disagreement["reason"] if disagreement else None,
            langgraph_message_count=disagreement["langgraph_message_count"] if disagreement else None,
        ))
    rows.reverse()
    next_before = rows[-1].checkpoint_id if more and rows else None
    return rows, next_before


def thread_namespaces(rt: DashboardRuntime, thread_id: str) -> list[namespaces.Namespace]:
    """The thread's checkpoint namespaces, root first (:func:`deerflow.namespaces.thread_namespaces`).

    Returns:
        The namespaces; ``[]`` on a saver without SQL tables (``InMemorySaver``).

    Raises:
        ThreadNotFoundError: the thread has no checkpoints.
    """
    if not has_sql_tables(rt.saver):
        return []
    found = namespaces.thread_namespaces(rt.saver, thread_id)
    if not found:
        raise _not_found(rt, thread_id)
    return found


def list_threads(rt: DashboardRuntime, **filters: Any) -> tuple[list[inventory.ThreadSummary], str | None]:
    """A page of the thread inventory (see :func:`deerflow.inventory.list_threads`)."""
    return inventory.list_threads(rt.saver, **filters)


def thread_summary(rt: DashboardRuntime, thread_id: str, *, head: StateView | None = None) -> inventory.ThreadSummary:
    """The inventory row of one thread: the summary's row while it still describes the head, else
    computed now from the thread's own rows (and the summary's copy healed).

    Args:
        head: the root-namespace head just materialized (``read_state`` without a
            checkpoint id), if the caller has it: a row already shown for that very
            head (same id, same marker and counters on it) is answered from memory.

    Raises:
        ThreadNotFoundError: the thread has no checkpoints.
    """
    facts = None
    if head is not None and head.checkpoint_ns == "":
        counters = head.metadata.get(COUNTERS_METADATA_KEY)
        facts = (head.checkpoint_id, head.metadata.get(CHECKPOINT_MODE_METADATA_KEY) == CHECKPOINT_MODE_DELTA,
                 isinstance(counters, dict) and "messages" in counters)
        if (cached := storage.summary_cache.get(rt, thread_id, *facts)) is not None:
            return cached
    summary = inventory.current_summary(rt.saver, thread_id) if has_sql_tables(rt.saver) else None
    if summary is None:
        summary = inventory.get_thread_summary(rt.saver, thread_id)
        if summary is None:
            raise _not_found(rt, thread_id)
        storage.heal_summary(rt, summary)
    storage.summary_cache.put(rt, summary)
    return summary


def thread_summary_or_none(rt: DashboardRuntime, thread_id: str) -> inventory.ThreadSummary | None:
    """:func:`thread_summary`, or ``None`` when it cannot be read (for error pages)."""
    from dashboard.errors import HANDLED

    try:
        return thread_summary(rt, thread_id)
    except HANDLED:
        return None


def exact_summary_or_none(rt: DashboardRuntime, thread_id: str) -> inventory.ThreadSummary | None:
    """The thread's row computed now from its own rows (the summary's copy healed when it differs), or ``None``
    when the thread has no checkpoints or cannot be read.

    For pages that show a thread's size right after a rewrite that keeps its head (a prune deletes older
    checkpoints under the same head id, so :func:`thread_summary` would still answer the stored, stale row):
    the revert and purge confirmations. One indexed aggregate of the thread's rows.
    """
    from dashboard.errors import HANDLED

    if not has_sql_tables(rt.saver):
        return thread_summary_or_none(rt, thread_id)
    try:
        live = inventory.get_thread_summary(rt.saver, thread_id)
        if live is not None:
            storage.heal_summary(rt, live)
        return live
    except HANDLED:
        return None


def head_digest(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str = "") -> dict[str, Any]:
    """Materialize the head and describe it: ids, message count, canonical digest, and who read it.

    Returns:
        ``{"thread_id", "checkpoint_id", "message_count", "messages_sha256",
        "mode", "snapshot_frequency", "host", "pid"}``, or on a handled error
        ``{"thread_id", "error", "detail", "hint", "status", "mode", ...}``.
    """
    import os
    import socket

    from dashboard.errors import HANDLED, describe
    from deerflow.digest import messages_sha256

    who = {"thread_id": thread_id, "mode": rt.mode, "snapshot_frequency": rt.snapshot_frequency,
           "host": socket.gethostname(), "pid": os.getpid()}
    try:
        view = read_state(rt, thread_id, None, checkpoint_ns)
    except HANDLED as exc:
        err = describe(exc)
        return {**who, "error": err.code, "detail": err.detail, "hint": err.hint, "status": err.status}
    messages = view.values.get("messages") or []
    return {**who, "checkpoint_id": view.checkpoint_id, "message_count": len(messages),
            "messages_sha256": messages_sha256(messages)}


def thread_cadence(rt: DashboardRuntime, thread_id: str, *,
                   summary: inventory.ThreadSummary | None = None) -> Any:
    """The snapshot cadence(s) that wrote the thread, inferred from metadata (issue 5, item 5).

    Args:
        summary: the thread's row as the page shows it (:func:`thread_summary`), if the caller has it:
            a row that counts no checkpoint with LangGraph's counters has no cadence to infer (no query).

    Returns:
        A :class:`deerflow.census.CadenceInference` (``exact`` cadences proven by
        snapshots, else a ``lower_bound``), or ``None`` for a thread without
        delta counters or on a saver without SQL tables.
    """
    from deerflow.census import infer_cadences

    if not has_sql_tables(rt.saver) or (summary is not None and summary.counters_count == 0):
        return None
    return infer_cadences(rt.saver, [thread_id], use_summary=False).get(thread_id)


def count_threads(rt: DashboardRuntime, *, mode: str | None = None, thread_class: str | None = None,
                  q: str | None = None, **_page: Any) -> int | None:
    """How many threads the list's filters match (:func:`deerflow.thread_count.count_threads`);
    ``None`` on a saver without SQL tables. Paging and sort arguments are accepted and ignored."""
    from deerflow.thread_count import count_threads as count

    if not has_sql_tables(rt.saver):
        return None
    return count(rt.saver, mode=mode, thread_class=thread_class, q=q)
