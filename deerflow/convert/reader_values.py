"""The value a rewrite stores where the replay rule and LangGraph's reader disagree: LangGraph's.

A rewrite never changes what DeerFlow reads at a checkpoint it keeps, and
DeerFlow reads through LangGraph's reader (the accessor). The one-pass walk
(:mod:`deerflow.convert.onepass`) computes the replay rule's value and names
where LangGraph's reader reads otherwise (``Entry.differs``):

* ``fork_input`` -- an ``input`` child of a checkpoint holding another turn's
  ``messages`` writes, and its seedless descendants: LangGraph's reader replays
  those writes in. The rewrite stores LangGraph's reading, read through the
  accessor before the namespace is rewritten;
* ``stored_none`` -- a stored ``messages = None`` between the seed and the
  checkpoint: LangGraph's own savers disagree (``SqliteSaver`` restarts from
  ``[]`` there, ``PostgresSaver`` walks past it; LangGraph #8686), so there is
  no one reading to keep. The rewrite keeps the documented choice, the replay
  rule's value, and records it on the report as a ``reader_departure`` finding.

Law: for every analyzed entry ``e`` after :meth:`ReaderValues.apply`,
``e.value == accessor.get(e).values["messages"]`` (read on the stored rows
before the rewrite) unless ``e.differs == "stored_none"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from deerflow.convert.delta_reader import delta_accessor
from deerflow.convert.onepass import stored_seed
from deerflow.convert.report import Abort, ThreadReport
from deerflow.storage.addressing import config_for

__all__ = ["DEPARTURE_KIND", "ReaderValues", "chained", "fork_input_candidates"]

#: The finding kind recording a checkpoint stored with the replay rule's value where the savers disagree.
DEPARTURE_KIND = "reader_departure"


def _parent(tup: Any) -> str | None:
    return tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None


def _is_seed(tup: Any) -> bool:
    return stored_seed(tup.checkpoint["channel_values"].get("messages"))[0]


def fork_input_candidates(tuples: Mapping[str, Any], writes: Mapping[str, list[Any]]) -> set[str]:
    """Checkpoint ids that may read a ``fork_input`` disagreement: a superset of where ``differs == "fork_input"``.

    Args:
        tuples: one namespace's ``{checkpoint_id: CheckpointTuple}``.
        writes: ``{checkpoint_id: [messages write values]}`` stored under each checkpoint.

    Returns:
        Every seedless ``input`` child of a checkpoint holding ``messages`` writes, and their seedless
        descendants (each to its next stored value).
    """
    children: dict[str, list[str]] = {}
    for cid, tup in tuples.items():
        parent = _parent(tup)
        if parent is not None:
            children.setdefault(parent, []).append(cid)
    stack = [cid for cid, tup in tuples.items()
             if (tup.metadata or {}).get("source") == "input" and writes.get(_parent(tup) or "")
             and not _is_seed(tup)]
    found: set[str] = set()
    while stack:
        cid = stack.pop()
        if cid in found:
            continue
        found.add(cid)
        stack.extend(k for k in children.get(cid, []) if not _is_seed(tuples[k]))
    return found


class ReaderValues:
    """LangGraph's readings of one thread's ``fork_input`` checkpoints, substituted into the walk's entries.

    Call :meth:`begin_namespace` from the walk's ``on_namespace`` hook (the stored rows are still the
    original ones there), then :meth:`apply` on every entry before it is written or verified.

    Args:
        saver: the session's saver (read inside the rewrite's transaction).
        thread_id: the thread.
        writes: the walk's ``writes`` mapping (``{checkpoint_id: [messages write values]}`` of the namespace
            being walked), read when :meth:`begin_namespace` runs.
        digest: ``messages -> hex SHA-256`` (the walk's, so each message is hashed once).
    """

    def __init__(self, saver: Any, thread_id: str, writes: Callable[[], Mapping[str, list[Any]]],
                 digest: Callable[[list[Any]], str]):
        self.saver, self.thread_id, self.writes, self.digest = saver, thread_id, writes, digest
        self._values: dict[tuple[str, str], list[Any] | Exception] = {}
        self._root_head: str | None = None

    def begin_namespace(self, ns: str, tuples: Mapping[str, Any]) -> None:
        """Read, through LangGraph's reader, every checkpoint of ``ns`` that may be a ``fork_input`` one."""
        if ns == "" and tuples:
            self._root_head = max(tuples)
        wanted = fork_input_candidates(tuples, self.writes())
        if not wanted:
            return
        accessor = delta_accessor(self.saver)
        for cid in sorted(wanted):
            try:
                values = accessor.get(config_for(self.thread_id, ns, cid)).values
                self._values[(ns, cid)] = list(values.get("messages") or [])
            except Exception as exc:  # noqa: BLE001 - raised by apply() if the value is needed
                self._values[(ns, cid)] = exc

    def apply(self, e: Any, report: ThreadReport) -> Any:
        """Give ``e`` (a :class:`~deerflow.convert.walk.Entry`) the value the rewrite must store.

        Returns:
            ``e``, with ``value`` and ``digest`` set to LangGraph's reading where ``e.differs == "fork_input"``
            (``report.head_messages_sha256`` follows at the root head); a ``reader_departure`` finding is
            added to ``report`` where ``e.differs == "stored_none"`` and ``e`` is rewritten.

        Raises:
            Abort: ``blocked`` when LangGraph's reader fails at a ``fork_input`` checkpoint.
        """
        if e.differs == "stored_none" and e.value is not None and e.rewrite:
            report.findings.append({
                "kind": DEPARTURE_KIND, "checkpoint_id": e.checkpoint_id, "checkpoint_ns": e.ns, "blocking": False,
                "detail": "a stored messages = None lies between the seed and this checkpoint, which LangGraph's "
                          "savers read differently (SQLite restarts there, Postgres walks past; LangGraph #8686): "
                          "the replay rule's value is kept, as documented"})
            return e
        if e.differs != "fork_input" or e.value is None:
            return e
        value = self._values.get((e.ns, e.checkpoint_id))
        if not isinstance(value, list):
            raise Abort("blocked", f"LangGraph's reader cannot read checkpoint {e.checkpoint_id}"
                        + (f" ({type(value).__name__}: {value})" if value is not None else " (not read)"),
                        "The thread's value there is unknown; it was not rewritten. Inspect it on its page.")
        old = e.digest
        e.value, e.digest = value, self.digest(value)
        if e.ns == "" and e.checkpoint_id == self._root_head and report.head_messages_sha256 == old:
            report.head_messages_sha256 = e.digest
        return e


def chained(*hooks: Callable[[str, dict[str, Any]], None] | None) -> Callable[[str, dict[str, Any]], None]:
    """One ``on_namespace`` hook calling each of ``hooks`` (``None`` skipped) in order."""
    live: Iterable[Callable[[str, dict[str, Any]], None]] = [h for h in hooks if h is not None]

    def hook(ns: str, tuples: dict[str, Any]) -> None:
        for h in live:
            h(ns, tuples)
    return hook
