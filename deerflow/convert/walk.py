"""One pass over a stored thread, shared by the delta->full converter and the full->delta compactor.

:class:`Walk` reads each namespace through the session's saver a page at a
time, materializes the ``messages`` channel once per checkpoint
(:mod:`deerflow.convert.onepass`) and hands each checkpoint on as an
:class:`Entry`; which checkpoints count as "to rewrite" is the caller's
predicate. :func:`check_watermark` is the live-writer check both use before commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from deerflow.config.database_config import DatabaseConfig
from deerflow.convert.encoding import MessageDigester, SharingDecoder
from deerflow.convert.onepass import (
    CheckpointNode,
    Finding,
    Materialized,
    SharedPrefix,
    materialize_namespace,
)
from deerflow.convert.reading import iter_checkpoints, iter_session_checkpoints
from deerflow.convert.report import Abort, ThreadReport, record
from deerflow.storage.addressing import config_for
from deerflow.storage.sessions import ConversionSession, open_session

if TYPE_CHECKING:
    from langgraph.checkpoint.base import CheckpointTuple

__all__ = ["Entry", "Walk", "check_watermark", "config_for", "run_attempts", "share_decoded_messages"]


@dataclass
class Entry:
    """One analyzed checkpoint, as the walk hands it on (its value is dropped once used)."""

    ns: str
    tup: CheckpointTuple  # the saver's CheckpointTuple, pending writes dropped
    value: list[Any] | None
    rewrite: bool
    digest: str | None = None  # messages_sha256(value); None when the value is unknown
    differs: str | None = None  # why LangGraph's reader reads this checkpoint differently (onepass.Materialized)

    @property
    def checkpoint_id(self) -> str:
        return str(self.tup.config["configurable"]["checkpoint_id"])


def share_decoded_messages(session: ConversionSession) -> None:
    """Wrap the session saver's serializer in a :class:`SharingDecoder` (once): one object per distinct message."""
    if not isinstance(session.saver.serde, SharingDecoder):
        session.saver.serde = SharingDecoder(session.saver.serde)


class Walk:
    """One pass over a thread: read each namespace through the saver, materialize, hand on each checkpoint.

    Decodes through a :class:`SharingDecoder` (installed on the session's
    saver), so snapshots and writes share one object per distinct message;
    hashes with one :class:`MessageDigester`; keeps the report's counts,
    findings and head digest up to date as checkpoints pass. Iterating twice
    reads the thread twice.

    ``full_storage=True`` (the compactor: threads that store the whole list at
    every checkpoint) holds each stored list, while its namespace waits to be
    walked, as a :class:`~deerflow.convert.onepass.SharedPrefix` of the list
    read just before it (its child's, newest first) where it is one, and reads
    :data:`FULL_PAGE_SIZE` checkpoints per page: memory holds one list of
    references per chain and one small page of raw rows, not one list per
    checkpoint. ``on_namespace`` then sees ``SharedPrefix`` values in
    ``channel_values["messages"]``; each handed-on entry's tuple has the list back.
    """

    #: Checkpoints per ``saver.list`` page with ``full_storage`` (each row holds a whole message list).
    FULL_PAGE_SIZE = 8

    def __init__(self, session: ConversionSession, thread_id: str, report: ThreadReport,
                 needs_rewrite: Callable[[Any, list[Any]], bool], *, full_storage: bool = False):
        """Args: ``needs_rewrite(tuple, value)``: True when the caller rewrites this checkpoint (``value`` known);
        ``full_storage``: see the class docstring."""
        self.session, self.thread_id, self.report = session, thread_id, report
        self.needs_rewrite = needs_rewrite
        self.full_storage = full_storage
        # checkpoint_id -> the messages write values stored under it, of the namespace being walked
        self.writes: dict[str, list[Any]] = {}
        share_decoded_messages(session)
        self.digest = MessageDigester()
        # Called with (checkpoint_ns, tuples by id) after a namespace is read, before its checkpoints are handed on.
        self.on_namespace: Callable[[str, dict[str, Any]], None] | None = None
        # Called with (checkpoint_ns, the saver's tuple, pending writes included) for each checkpoint as it is read.
        self.on_read: Callable[[str, Any], None] | None = None

    def _read(self, ns: str) -> Iterator[Any]:
        """The namespace's tuples, newest first: ``saver.list`` pages; with full storage, smaller pages read by
        :func:`~deerflow.convert.reading.iter_session_checkpoints` (on Postgres without the saver's aggregates)."""
        if not self.full_storage:
            return iter_checkpoints(self.session.saver, self.thread_id, ns)
        return iter_session_checkpoints(self.session, self.thread_id, ns, page_size=self.FULL_PAGE_SIZE)

    def _namespace(self, ns: str,
                   paths: dict[tuple[str, str, str], str]) -> tuple[dict[str, Any], list[CheckpointNode]]:
        # The saver returns pending writes in writes_sort_key (task_path, task_id, idx) order;
        # task_path (a property of the task) is read only to flag order-unknown parallel writes.
        tuples: dict[str, Any] = {}
        nodes: list[CheckpointNode] = []
        self.writes = {}
        newer: SharedPrefix | None = None  # the last stored list read (newest first), as a SharedPrefix
        for tup in self._read(ns):
            if self.on_read is not None:
                self.on_read(ns, tup)
            cid = tup.config["configurable"]["checkpoint_id"]
            values = tup.checkpoint["channel_values"]
            stored = values.get("messages")
            if self.full_storage and type(stored) is list:
                newer = values["messages"] = _shared(stored, newer)
            writes = [(w[0], w[2], paths.get((ns, cid, w[0])))
                      for w in tup.pending_writes or [] if w[1] == "messages"]
            tuples[cid] = tup._replace(pending_writes=None)
            if writes:
                self.writes[cid] = [value for _task, value, _path in writes]
            nodes.append(CheckpointNode(
                checkpoint_id=cid,
                parent_id=tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None,
                stored=values.get("messages"),
                writes=writes,
                version=(tup.checkpoint.get("channel_versions") or {}).get("messages"),
                stored_none="messages" in values and values["messages"] is None,
                source=(tup.metadata or {}).get("source"),
            ))
        return tuples, nodes

    def __iter__(self) -> Iterator[Entry]:
        report, session = self.report, self.session
        report.findings, report.checkpoints_total, report.checkpoints_to_rewrite = [], 0, 0
        report.head_messages_sha256 = None
        head = session.query("SELECT MAX(checkpoint_id) AS head FROM checkpoints WHERE thread_id = ? "
                             "AND checkpoint_ns = ''", [self.thread_id])[0]["head"]
        paths = session.task_paths(self.thread_id)
        for ns in session.namespaces(self.thread_id):
            tuples, nodes = self._namespace(ns, paths)
            if self.on_namespace is not None:
                self.on_namespace(ns, tuples)
            for item in materialize_namespace(nodes):
                if isinstance(item, Finding):
                    report.findings.append({**asdict(item), "checkpoint_ns": ns})
                    if item.blocking and item.kind in ("dangling_parent", "cycle"):
                        report.checkpoints_total += 1  # stored but never reached by the walk
                    continue
                assert isinstance(item, Materialized)
                tup = tuples.pop(item.checkpoint_id)
                if isinstance(tup.checkpoint["channel_values"].get("messages"), SharedPrefix):
                    tup.checkpoint["channel_values"]["messages"] = item.messages  # the stored list, equal item by item
                rewrite = item.messages is not None and self.needs_rewrite(tup, item.messages)
                digest = None if item.messages is None else self.digest(item.messages)
                report.checkpoints_total += 1
                report.checkpoints_to_rewrite += rewrite
                if ns == "" and item.checkpoint_id == head:
                    report.head_messages_sha256 = digest
                yield Entry(ns, tup, item.messages, rewrite, digest, item.differs)

    def raise_if_blocked(self, acknowledged: frozenset[str] = frozenset()) -> None:
        """Raises ``Abort`` when the last pass reported a blocking finding not in ``acknowledged``.

        Args:
            acknowledged: finding kinds the operator accepted (only ``branch_ambiguous`` may be:
                its value is LangGraph's reading, every write of the branch point).

        Raises:
            Abort: ``branch_ambiguous`` when that is the only kind blocking (the hint names the
                acknowledgement), else ``blocked``.
        """
        blocking = [f for f in self.report.findings if f["blocking"] and f["kind"] not in acknowledged]
        if blocking and all(f["kind"] == "branch_ambiguous" for f in blocking):
            raise Abort("branch_ambiguous", f"{len(blocking)} checkpoint(s) of sibling forks read writes that "
                        f"may belong to a sibling; first: {blocking[0]['detail']}",
                        "Inspect the branch on the thread page. To convert with LangGraph's reading (every write of "
                        "the branch point, as DeerFlow reads it today), acknowledge it: convert_threads "
                        "--acknowledge-branch-ambiguous, or the job option 'Acknowledge ambiguous branches'.")
        if blocking:
            raise Abort("blocked", f"{len(blocking)} blocking finding(s); first: {blocking[0]['detail']}",
                         "The thread's history cannot be replayed completely; it stays in delta mode.")


def _shared(stored: list[Any], newer: SharedPrefix | None) -> SharedPrefix:
    """``stored`` as a prefix of ``newer``'s base when it is one (the same objects), else as its own base."""
    n = len(stored)
    if newer is not None and n <= len(newer.base) and (not n or stored[-1] is newer.base[n - 1]) \
            and stored == newer.base[:n]:
        return SharedPrefix(newer.base, n)
    return SharedPrefix(stored, n)


def check_watermark(session: ConversionSession, thread_id: str, mark: tuple[int, str | None]) -> None:
    """Raises ``Abort("changed_during_conversion")`` when the thread's watermark moved since ``mark``."""
    if session.watermark(thread_id) != mark:
        raise Abort("changed_during_conversion", "new checkpoints were written while converting",
                     "Retried automatically; if it keeps happening, convert when the thread is idle.")


def run_attempts(database: DatabaseConfig, thread_id: str,
                 once: Callable[[ConversionSession, ThreadReport], None], *, max_attempts: int) -> ThreadReport:
    """Run one rewrite of a thread in its own write session, again while new checkpoints keep arriving.

    Each attempt gets a fresh :class:`ThreadReport` (``attempts`` = its number)
    and a fresh session (:func:`deerflow.storage.sessions.open_session`, rolled
    back unless ``once`` commits). An :class:`Abort` is recorded on the report;
    only ``changed_during_conversion`` (:func:`check_watermark`) is retried.

    Args:
        database: the checkpoint database.
        thread_id: the thread.
        once: ``once(session, report)``: one attempt; commits the session on success, raises
            :class:`Abort` otherwise.
        max_attempts: attempts at most (count, >= 1).

    Returns:
        The last attempt's report, ``duration_s`` covering every attempt (seconds).
    """
    started = time.monotonic()
    report = ThreadReport(thread_id=thread_id)
    for attempt in range(1, max_attempts + 1):
        report = ThreadReport(thread_id=thread_id, attempts=attempt)
        with open_session(database) as session:
            try:
                once(session, report)
            except Abort as exc:
                record(report, exc)
        if report.status != "changed_during_conversion":
            break
    report.duration_s = round(time.monotonic() - started, 3)
    return report
