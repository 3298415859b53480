"""One thread read path for every caller: a checkpoint materialized, a history page, the namespaces.

:class:`ThreadReader` is built from ``(saver, accessor, mode, snapshot_frequency)``
(a process's frozen runtime) and applies every rule a read must apply before
it shows a value, in this order:

1. the address resolves to a stored checkpoint (else ``ThreadNotFoundError``
   or ``CheckpointNotFoundError``, 404);
2. full mode: the lineage gate (:func:`deerflow.reader.gates.gate_lineage`, 409);
3. delta mode: the replay chain is whole (else ``IncompleteHistoryError``, 422);
4. the accessor materializes the tuple already fetched (``ReducerError``, 422,
   names a write the ``messages`` reducer refuses);
5. undeclared channels shown raw, ``Overwrite`` wrappers unwrapped, and the
   replay rule's value where LangGraph's reader differs (a finding;
   ``BranchAmbiguousError``, 422, where nothing decides).

Config drift, summary upkeep and HTTP stay with the caller (the dashboard).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.types import StateSnapshot

from deerflow import inventory
from deerflow._langgraph_compat import _DeltaSnapshot
from deerflow.errors import (
    MISMATCH_MESSAGE,
    BranchAmbiguousError,
    CheckpointModeMismatchError,
    CheckpointNotFoundError,
    IncompleteHistoryError,
    ReducerError,
    ThreadNotFoundError,
)
from deerflow.reader.gates import (
    Branches,
    gate_lineage,
    replay_chain_for,
    replay_chains_for,
    replay_rule,
)
from deerflow.reader.history_values import derive_messages
from deerflow.reader.lineage import ReplayChain
from deerflow.reader.prefetch import reuse_tuple
from deerflow.reader.replaycheck import find_reducer_failure
from deerflow.reader.views import (
    CheckpointRow,
    StateView,
    clean_metadata,
    messages_stored,
    pending_nodes,
    unknown_channels,
    unwrap_overwrites,
)
from deerflow.runtime.checkpoint_mode import CHECKPOINT_MODE_DELTA, checkpoint_metadata_uses_delta
from deerflow.runtime.checkpoint_state import CheckpointStateAccessor
from deerflow.storage.addressing import config_for
from deerflow.storage.sqlread import has_sql_tables

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

__all__ = ["ThreadReader"]


@dataclass(frozen=True)
class ThreadReader:
    """Reads of stored threads with every gate and gap rule applied.

    Attributes:
        saver: the process's LangGraph saver (``SqliteSaver``, ``PostgresSaver`` or ``InMemorySaver``).
        accessor: the :class:`CheckpointStateAccessor` bound to ``saver`` at ``mode`` and the cadence.
        mode: the frozen ``checkpoint_channel_mode`` (``full`` or ``delta``).
        snapshot_frequency: the frozen cadence (updates per ``_DeltaSnapshot``).
    """

    saver: BaseCheckpointSaver[Any]
    accessor: CheckpointStateAccessor
    mode: str
    snapshot_frequency: int

    # -- addressing -------------------------------------------------------
    def thread_exists(self, thread_id: str) -> bool:
        """True when the thread has at least one checkpoint (SQL: one indexed aggregate)."""
        if has_sql_tables(self.saver):
            return inventory.get_thread_summary(self.saver, thread_id) is not None
        return self.saver.get_tuple(config_for(thread_id)) is not None

    def raw_tuple(self, thread_id: str, checkpoint_id: str | None, checkpoint_ns: str = "") -> Any:
        """The saver's ``CheckpointTuple`` at the address (the namespace head when ``checkpoint_id`` is None).

        Raises:
            ThreadNotFoundError: the thread has no checkpoints.
            CheckpointNotFoundError: the thread exists, the address does not.
        """
        # "" addresses the head, as None does
        tup = self.saver.get_tuple(config_for(thread_id, checkpoint_ns, checkpoint_id or None))
        if tup is not None:
            return tup
        if not self.thread_exists(thread_id):
            raise ThreadNotFoundError(thread_id)
        raise CheckpointNotFoundError(thread_id, checkpoint_id, checkpoint_ns)

    def namespaces(self, thread_id: str) -> list[inventory.Namespace]:
        """The thread's checkpoint namespaces, root first (:func:`deerflow.inventory.thread_namespaces`).

        Returns:
            The namespaces; ``[]`` on a saver without SQL tables (``InMemorySaver``).

        Raises:
            ThreadNotFoundError: the thread has no checkpoints.
        """
        if not has_sql_tables(self.saver):
            return []
        found = inventory.thread_namespaces(self.saver, thread_id)
        if not found:
            raise ThreadNotFoundError(thread_id)
        return found

    def has_subgraphs(self, thread_id: str) -> bool:
        """Whether the thread has a subgraph namespace (:func:`deerflow.inventory.has_subgraph_namespaces`).

        One primary-key probe, however long the thread. ``False`` on a saver without
        SQL tables, and for a thread with no checkpoints (no error: ask :meth:`namespaces`).
        """
        return has_sql_tables(self.saver) and inventory.has_subgraph_namespaces(self.saver, thread_id)

    # -- materializing ----------------------------------------------------
    def materialize(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str,
                    tup: CheckpointTuple | None = None) -> StateSnapshot:
        """The accessor's snapshot; a write the ``messages`` reducer refuses: :class:`ReducerError` (422).

        Args:
            tup: the raw tuple already fetched for ``checkpoint_id`` (reused), or ``None``.

        Raises:
            ReducerError: the replay raised ``ValueError``; names the write and the missing id.
        """
        config = config_for(thread_id, checkpoint_ns, checkpoint_id)
        try:
            return self.accessor.get(reuse_tuple(config, self.saver, tup) if tup is not None else config)
        except ValueError as exc:
            if isinstance(exc, ReducerError):
                raise
            failure = find_reducer_failure(self.saver, thread_id, checkpoint_ns, checkpoint_id)
            if failure is None:
                raise ReducerError(thread_id, checkpoint_id, checkpoint_ns,
                                   reason=f"replaying its stored writes failed ({exc})") from exc
            raise ReducerError(thread_id, checkpoint_id, checkpoint_ns, reason=failure.describe(),
                               write_checkpoint_id=failure.write_checkpoint_id, task_id=failure.task_id,
                               missing_ids=failure.missing_ids) from exc

    def read_state(self, thread_id: str, checkpoint_id: str | None = None,
                   checkpoint_ns: str = "") -> StateView:
        """Materialize one checkpoint (the namespace head when ``checkpoint_id`` is None).

        Raises:
            CheckpointModeMismatchError: full mode and the checkpoint or its lineage is delta (409).
            ThreadNotFoundError / CheckpointNotFoundError: nothing stored there (404).
            IncompleteHistoryError: delta mode and the replay chain is broken, or the stored
                ``messages`` value is not a list (a snapshot blob is missing) (422).
            ReducerError: a stored write on the way is refused by the messages reducer (422).
            BranchAmbiguousError: the replay walk passes sibling forks whose writes nothing stored
                attributes to one child (422).
        """
        tup = self.raw_tuple(thread_id, checkpoint_id, checkpoint_ns)
        resolved_id = tup.config["configurable"]["checkpoint_id"]
        gate_lineage(self.saver, self.mode, thread_id, checkpoint_ns, resolved_id)
        chain = replay_chain_for(self.saver, self.mode, thread_id, checkpoint_ns, resolved_id)
        if chain.gap is not None:  # never show the messages after a break as the whole conversation
            raise IncompleteHistoryError(thread_id, resolved_id, checkpoint_ns, reason=chain.gap.describe())
        # Materialize the checkpoint that was gated, even if a newer head appeared meanwhile,
        # from the tuple already fetched (LangGraph would fetch it, blobs and all, a second time).
        snapshot = self.materialize(thread_id, checkpoint_ns, resolved_id, tup)
        values = dict(snapshot.values or {})
        values.update(unknown_channels(self.mode, self.snapshot_frequency, tup.checkpoint))
        findings = unwrap_overwrites(values)
        branches = Branches(self.saver, thread_id, checkpoint_ns, among=chain.checkpoint_ids[1:])
        rule = replay_rule(self.saver, thread_id, checkpoint_ns, chain, branches, values.get("messages"))
        if rule is not None:  # never present LangGraph's reading as the truth where the replay rule differs
            values["messages"] = rule[0]
            findings = (*findings, rule[1])
        if isinstance(values.get("messages"), _DeltaSnapshot):
            # Old LangGraph readers hand a full-mode process the raw snapshot object.
            raise CheckpointModeMismatchError(MISMATCH_MESSAGE, thread_id=thread_id)
        if "messages" in values and not isinstance(values["messages"], list):
            # e.g. Postgres's inline snapshot marker (True) whose blob row is gone: never show it as messages.
            kind = type(values["messages"]).__name__
            raise IncompleteHistoryError(thread_id, resolved_id, checkpoint_ns,
                                         reason=f"the stored messages value is a {kind}, "
                                                "not a message list (a snapshot blob is missing)")
        parent = snapshot.parent_config["configurable"]["checkpoint_id"] if snapshot.parent_config else None
        return StateView(
            thread_id=thread_id,
            checkpoint_id=snapshot.config["configurable"]["checkpoint_id"],
            checkpoint_ns=checkpoint_ns,
            parent_checkpoint_id=parent,
            created_at=snapshot.created_at,
            metadata=clean_metadata(snapshot.metadata),
            values=values,
            next=pending_nodes(tup.checkpoint),
            findings=findings,
            pending_writes=list(tup.pending_writes or []),
        )

    def read_history(self, thread_id: str, *, limit: int = 50, before: str | None = None,
                     checkpoint_ns: str = "") -> tuple[list[CheckpointRow], str | None]:
        """One page of a namespace's checkpoints, newest first, materializing only that page.

        A row whose messages cannot be read carries a ``problem`` instead of failing the page.

        Args:
            limit: rows per page (count, 1..500).
            before: a checkpoint id; the page starts just below it.

        Returns:
            ``(rows, next_before)``; ``next_before`` is ``None`` on the last page.

        Raises:
            The same errors as :meth:`read_state`; ``CheckpointNotFoundError``
            when ``before`` names no checkpoint of this namespace.
        """
        if before:  # it must name a checkpoint of this namespace (404 otherwise)
            self.raw_tuple(thread_id, before, checkpoint_ns)
        before_config = config_for(thread_id, checkpoint_ns, before) if before else None
        tuples = list(self.saver.list(config_for(thread_id, checkpoint_ns), before=before_config,
                                      limit=limit + 1))
        page, more = tuples[:limit], len(tuples) > limit
        if not page:  # the thread's 404, or the gate on the checkpoint the empty page starts below
            head = self.raw_tuple(thread_id, before, checkpoint_ns)
            head_id = head.config["configurable"]["checkpoint_id"]
            gate_lineage(self.saver, self.mode, thread_id, checkpoint_ns, head_id)
        # Oldest first: each row's value and lineage follow from its parent's row when that is on the page
        # (deerflow.reader.history_values); a row that does not follow plainly is read as before.
        known: dict[str, tuple[Any, list[Any] | None]] = {}  # id -> (tuple, LangGraph's reading of messages)
        branches = Branches(self.saver, thread_id, checkpoint_ns)
        chains = replay_chains_for(self.saver, self.mode, thread_id, checkpoint_ns,
                                   [t.config["configurable"]["checkpoint_id"] for t in page])  # one query
        rows = [self._history_row(thread_id, checkpoint_ns, tup, known, branches, chains[
            tup.config["configurable"]["checkpoint_id"]]) for tup in reversed(page)]
        rows.reverse()
        next_before = rows[-1].checkpoint_id if more and rows else None
        return rows, next_before

    def _history_row(self, thread_id: str, checkpoint_ns: str, tup: CheckpointTuple,
                     known: dict[str, tuple[Any, list[Any] | None]], branches: Branches,
                     chain: ReplayChain) -> CheckpointRow:
        """One row of :meth:`read_history` (``chain``: its replay walk, from :func:`replay_chains_for`);
        records its reading in ``known`` for its children on the page."""
        delta = self.mode == CHECKPOINT_MODE_DELTA
        cid = tup.config["configurable"]["checkpoint_id"]
        if not delta:
            gate_lineage(self.saver, self.mode, thread_id, checkpoint_ns, cid)
        parent_id = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        nothing: tuple[Any, list[Any] | None] = (None, None)
        parent_tup, parent_theirs = nothing if parent_id == cid else known.get(parent_id or "", nothing)
        problem = "history_incomplete" if chain.gap else None
        messages = theirs = None
        disagreement: dict[str, Any] | None = None
        if not chain.gap:
            try:
                # LangGraph's reading: derived from the parent row's reading when it follows plainly
                theirs = derive_messages(tup, parent_tup, parent_theirs, delta=delta)
                if theirs is None:
                    theirs = self.materialize(thread_id, checkpoint_ns, cid).values.get("messages") or []
                messages = theirs
                rule = replay_rule(self.saver, thread_id, checkpoint_ns, chain, branches, theirs)
                if rule is not None:  # shown: the replay rule's value, flagged
                    messages, disagreement = rule
            except ReducerError:  # this row cannot be read; the rows before the bad write still are
                problem = "reducer_error"
            except BranchAmbiguousError:
                problem = "branch_ambiguous"
        known[cid] = (tup, theirs if isinstance(theirs, list) and problem is None else None)
        metadata = tup.metadata or {}
        return CheckpointRow(
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
        )
