"""The checks that tie a conversion or a compaction to LangGraph's own delta reader, at the cost of one walk.

* :class:`IntegrityCheck` (before writing): every checkpoint's one-pass value
  (:mod:`deerflow.convert.onepass`) against what LangGraph's reader gives for
  the stored rows, computed from the rows the caller's walk reads anyway
  (:class:`~deerflow.convert.langgraph_rule.LangGraphRule`), plus real
  LangGraph reads at a sample (each namespace head and a few spread over it)
  that must agree with that rule.
* :func:`verify_against_langgraph` (after a compaction, inside its
  transaction): the rewritten rows read back through the same rule, every
  checkpoint against its digest before the rewrite, plus real LangGraph reads
  (``graph.get_state`` via the delta accessor) at every namespace head, every
  snapshot seam and a few others.

Both replace one LangGraph read per checkpoint (a history fetch and a replay
of up to K checkpoints each) by one ``replay_writes`` per checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from deerflow.convert.langgraph_rule import LangGraphRule, RuleRead, real_reads, sample_points
from deerflow.convert.report import Abort
from deerflow.storage.sessions import ConversionSession

__all__ = ["SAMPLE_SPREAD", "IntegrityCheck", "verify_against_langgraph"]

#: Checkpoints per namespace (besides heads and seams) also read through LangGraph's real reader (count).
SAMPLE_SPREAD = 3


class IntegrityCheck:
    """The integrity check, riding on a :class:`~deerflow.convert.walk.Walk` that reads the thread anyway.

    Installs ``walk.on_read`` to keep each namespace's tuples as read; the
    caller calls :meth:`begin_namespace` from the walk's ``on_namespace`` hook
    (before that namespace is written, so the reads are of the stored rows),
    :meth:`compare` for every entry, and :meth:`raise_if_different` after the walk.

    Args:
        session: the session whose saver the walk reads through.
        thread_id: the thread.
        walk: the walk (its ``digest`` is shared, so each message is hashed once).
        spread: checkpoints per namespace, besides its head, read through the real reader.
    """

    def __init__(self, session: ConversionSession, thread_id: str, walk: Any, *, spread: int = SAMPLE_SPREAD):
        self.session, self.thread_id, self.spread = session, thread_id, spread
        self.digest = walk.digest
        self.rule = LangGraphRule(session.saver, walk.digest)
        self.paths = session.task_paths(thread_id)
        self._read: list[Any] = []
        walk.on_read = lambda ns, tup: self._read.append(tup)
        self._theirs: dict[str, RuleRead] = {}
        self.difference: dict[str, Any] | None = None
        self.rule_conflict: dict[str, Any] | None = None

    def begin_namespace(self, ns: str, tuples: dict[str, Any]) -> None:
        """LangGraph's reads of namespace ``ns`` (just read by the walk); the real reader at its sample."""
        self._theirs = {r.checkpoint_id: r for r in self.rule.read_namespace(ns, self._read, self.paths)}
        self._read = []
        if not self.rule.sound:
            return  # a cycle or a lost parent: the walk reports it as blocking; LangGraph's walk could loop
        points = sample_points([(ns, cid) for cid in self._theirs], spread=self.spread)
        for _ns, cid, got, error in real_reads(self.session.saver, self.thread_id, points, self.digest):
            rule = self._theirs[cid]
            if got != rule.digest and self.rule_conflict is None:
                self.rule_conflict = {"checkpoint_id": cid, "checkpoint_ns": ns, "langgraph_sha256": got,
                                      "rule_sha256": rule.digest, **({"langgraph_error": error} if error else {})}
            self._theirs[cid] = RuleRead(ns, cid, got, error)  # the real read is what LangGraph shows

    def compare(self, e: Any) -> None:
        """Note the first checkpoint (walk order) whose digest, as the rewrite will store it (after
        :meth:`~deerflow.convert.reader_values.ReaderValues.apply`), is not LangGraph's."""
        if self.difference is not None:
            return
        if getattr(e, "differs", None) == "stored_none":
            return  # LangGraph's own savers disagree here: the documented replay value, recorded as a departure
        theirs = self._theirs.get(e.checkpoint_id) or RuleRead(e.ns, e.checkpoint_id, None, "not read")
        if theirs.digest != e.digest:
            self.difference = {"checkpoint_id": e.checkpoint_id, "checkpoint_ns": e.ns, "onepass_sha256": e.digest,
                               "langgraph_sha256": theirs.digest}
            if theirs.error is not None:
                self.difference["langgraph_error"] = theirs.error

    def raise_if_different(self) -> None:
        """Raises:
            Abort: ``integrity_mismatch`` at the first checkpoint (walk order) where the
                digests differ or LangGraph's reader fails; ``first_difference`` is
                ``{checkpoint_id, checkpoint_ns, onepass_sha256, langgraph_sha256[, langgraph_error]}``.
                Also when a real LangGraph read disagrees with the replayed rule
                (``{checkpoint_id, checkpoint_ns, langgraph_sha256, rule_sha256}``): then the rule
                cannot vouch for the other checkpoints.
        """
        hint = ("The stored delta history does not replay consistently. Inspect the thread's history; "
                "do not convert until an operator has decided which value is right.")
        if self.difference is not None:
            d = self.difference
            error = d.get("langgraph_error")
            raise Abort("integrity_mismatch",
                        f"one-pass materialization differs from LangGraph's reader at checkpoint {d['checkpoint_id']}"
                        + (f" (namespace {d['checkpoint_ns']})" if d["checkpoint_ns"] else "")
                        + (f"; LangGraph's reader failed: {error}" if error else ""), hint, d)
        if self.rule_conflict is not None:
            d = self.rule_conflict
            raise Abort("integrity_mismatch",
                        f"LangGraph's reader at checkpoint {d['checkpoint_id']} differs from its replayed read rule",
                        hint, d)


def verify_against_langgraph(session: ConversionSession, thread_id: str,
                             expected: Iterable[tuple[str, str, str | None]], digest: Callable[[list[Any]], str],
                             seams: Iterable[tuple[str, str]] = (), *, spread: int = SAMPLE_SPREAD) -> None:
    """Every checkpoint of the rewritten thread, read as LangGraph reads it, against its digest before.

    The rows are read back inside the caller's transaction as ``session.saver``'s
    tuples (:func:`~deerflow.convert.reading.iter_session_checkpoints`) and
    LangGraph's read rule replayed over them; the real reader
    (``session.saver`` through LangGraph's graph) is consulted at every
    namespace head, at ``seams`` and at ``spread`` more checkpoints.

    Args:
        expected: ``[(checkpoint_ns, checkpoint_id, digest before)]`` in walk order (``None``: not checked).
        digest: ``messages -> hex SHA-256``.
        seams: positions where a snapshot starts a replay chain (always read for real).

    Raises:
        Abort: ``verification_failed`` at the first difference, with
            ``{checkpoint_id, checkpoint_ns, expected_sha256, delta_reader_sha256[, delta_reader_error]}``.
    """
    want = {(ns, cid): d for ns, cid, d in expected if d is not None}
    got = {(r.checkpoint_ns, r.checkpoint_id): r for r in LangGraphRule(session.saver, digest)
           .read_thread(session, thread_id)}  # the compacted thread was walked whole before: no cycles
    points = sample_points(want, extra=[s for s in seams if s in want], spread=spread)
    real = {(ns, cid): RuleRead(ns, cid, d, error)
            for ns, cid, d, error in real_reads(session.saver, thread_id, points, digest)}
    for key, before in want.items():
        for read in (got.get(key) or RuleRead(key[0], key[1], None, "not read back"), real.get(key)):
            if read is not None and read.digest != before:
                ns, cid = key
                difference = {"checkpoint_id": cid, "checkpoint_ns": ns, "expected_sha256": before,
                              "delta_reader_sha256": read.digest}
                if read.error is not None:
                    difference["delta_reader_error"] = read.error
                raise Abort("verification_failed",
                            f"after compaction LangGraph's delta reader reads checkpoint {cid} differently"
                            + (f" (namespace {ns})" if ns else "") + (f": {read.error}" if read.error else ""),
                            "Nothing was changed (rolled back). Report the thread shape.", difference)
